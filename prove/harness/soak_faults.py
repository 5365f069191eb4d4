"""The soak's faults (mixed into ``Soak``, prove/harness/soak.py, whose run, workers, targets,
cluster and record they act on): at random (seeded) times a worker SIGKILLed, SIGSTOPped or
restarted armed with a kill point, a target dark, slow or losing one answer, and PostgreSQL
crashed and restarted every ``pg_restart_every`` seconds."""

from __future__ import annotations

import os
import signal
import threading
import time


class SoakFaults:
    """The fault injector thread (``_inject``) of a soak run, and the faults it injects."""

    def _inject(self) -> None:
        kinds = ("sigkill", "sigstop", "restart_armed", "target_outage", "target_slow", "target_lost_answer")
        next_pg = time.monotonic() + self.cfg.pg_restart_every
        while not self.stop.wait(self.rng.expovariate(1 / self.cfg.fault_every)):
            if not self.faulting.is_set():
                continue
            if time.monotonic() >= next_pg:
                next_pg = time.monotonic() + self.cfg.pg_restart_every
                self._fault("pg_restart_immediate")
                self.say("fault: PostgreSQL stop -m immediate, start")
                self.cluster.restart_immediate()
                continue
            kind = self.rng.choice(kinds)
            try:
                self._one_fault(kind)
            except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is counted
                self.rec.harness_errors[f"fault {kind}: {type(exc).__name__}"] += 1

    def _one_fault(self, kind: str) -> None:
        if kind in ("sigkill", "sigstop", "restart_armed"):
            with self.slots_lock:
                slot = self.rng.choice(self.slots)
                p = slot.proc
                if p is None or p.poll() is not None or slot.stopped_until is not None:
                    return
                if kind == "sigkill":
                    slot.armed = None
                    os.kill(p.pid, signal.SIGKILL)
                elif kind == "sigstop":
                    os.kill(p.pid, signal.SIGSTOP)
                    slot.armed = None
                else:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait()
                    self._spawn(slot, arm=True)
            self._fault(kind)
            return
        tier = self.rng.choice((1, 2))
        if kind == "target_outage":
            self._fault(kind)
            self._target(tier, "/admin/blackhole", {"on": True})
            self._later(self.rng.uniform(3, 12), tier, "/admin/blackhole", {"on": False})
        elif kind == "target_slow":
            self._fault(kind)
            self._target(
                tier, "/admin/delay", {"seconds": round(self.rng.uniform(0.5, 1.5) * self.cfg.send_timeout, 2)}
            )
            self._later(self.rng.uniform(5, 15), tier, "/admin/delay", {"seconds": 0})
        else:
            self._fault(kind)
            self._target(tier, "/admin/fail_next", {"status": 500, "apply": self.rng.random() < 0.5})

    def _later(self, seconds: float, tier: int, path: str, body: dict) -> None:
        """End a target fault after ``seconds`` without holding up the next fault (the drain
        turns every target fault off again in any case)."""

        def end():
            try:
                self._target(tier, path, body)
            except Exception as exc:  # noqa: BLE001
                self.rec.harness_errors[f"end fault {path}: {type(exc).__name__}"] += 1

        timer = threading.Timer(seconds, end)
        timer.daemon = True
        timer.start()
