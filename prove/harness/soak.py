"""A long run under faults: ``python manage.py soak --minutes M``.

On a fresh database (``ilr_soak``) of the embedded PostgreSQL, W ``ilr_worker`` subprocesses run,
at a steady rate, the refund workflow (``demo.workflows.refund``: the model stub decides, the workflow asks for
approval through an approval request, an approver thread approves it, the gated refund goes to
a tier-1 or a tier-2 payment target) and a multi-step workflow (``soak_steps``: five steps, a durable timer, a
signal). Meanwhile, at random (seeded) times:

- a worker is SIGKILLed or SIGSTOPped (then SIGCONTed after twice the lease) from outside;
- a worker is restarted armed with a kill point (``ILR_KILL_AT`` or ``ILR_STOP_AT`` at a random
  point and hit count), so it dies or stops exactly there;
- a target goes dark (blackhole: requests held, no answer), answers slowly (a delay near the
  send timeout), or loses one answer (``fail_next`` 500, applied or not); all EMULATED faults
  of the local target;
- PostgreSQL is crashed and restarted (``pg_ctl stop -m immediate``, then start) every few
  minutes.

Every few minutes and at the end the invariants registry runs over the database with both
targets' ledgers and access logs as evidence. At the end the feed and the faults stop, every
worker is healthy again, and the run waits for every workflow to end. Reported: throughput over
time (a plot), faults by kind, workflows started / ended by status / not ended, effects by
outcome, applications per effect at each target (duplicates), and every violation.

The faults are injected by prove/harness/soak_faults.py; the report is gathered and written by
prove/harness/soak_report.py.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr import workflow
from prove.harness.soak_faults import SoakFaults
from prove.harness.soak_report import collect_report
from prove.queries import SOAK_ACTIVE_STATUS_COUNTS, SOAK_STATUS_COUNTS

ROOT = Path(__file__).resolve().parents[2]
SOAK_DB = "ilr_soak"
PAID = 10_000
# Kill points a worker reaches on its normal path; the two resolve_* points are reached only in
# recovery and are armed too (they fire when a worker recovers a send).
POINTS = tuple(p for p in killpoints.POINTS)


def _work(name: str, i: int) -> dict:
    """A step body: a small deterministic computation."""
    return {"step": name, "value": (i * 7919) % 1000}


@workflow(name="soak_steps", version="1")
def soak_steps(ctx, input):
    """Five steps, a one-second durable timer, then signal "go" (sent by the feeder at start)."""
    out = [ctx.step(f"s{i}", _work, f"s{i}", i) for i in range(3)]
    ctx.sleep(1)
    out += [ctx.step(f"s{i}", _work, f"s{i}", i) for i in range(3, 5)]
    go = ctx.wait_signal("go", timeout=3600)
    return {"sum": sum(o["value"] for o in out), "go": go}


@dataclass
class Config:
    """One soak run's knobs (seconds unless named otherwise)."""

    minutes: float = 60.0
    rate: float = 1.0  # workflows started per second, alternating refund t1, steps, refund t2, steps
    workers: int = 3
    concurrency: int = 8
    lease_ttl: float = 5.0
    poll: float = 0.5
    fault_every: float = 20.0  # mean gap between worker and target faults (exponential)
    arm_probability: float = 0.3  # a restarted worker is armed with a kill or stop point
    pg_restart_every: float = 240.0
    check_every: float = 300.0
    drain_timeout: float = 600.0
    seed: int = 1
    send_timeout: float = 3.0
    settle_margin: float = 2.0


@dataclass
class Slot:
    """One worker position: its current process and how it was armed."""

    index: int
    proc: subprocess.Popen | None = None
    armed: str | None = None
    stopped_until: float | None = None
    generation: int = 0


@dataclass
class Record:
    """What the run saw, for the report."""

    faults: Counter = field(default_factory=Counter)
    fired: Counter = field(default_factory=Counter)
    started: Counter = field(default_factory=Counter)
    samples: list = field(default_factory=list)  # (t_s, {status: n})
    fault_times: list = field(default_factory=list)  # (t_s, kind)
    checks: list = field(default_factory=list)  # (t_s, {invariant: violations})
    harness_errors: Counter = field(default_factory=Counter)
    approvals: int = 0


class Soak(SoakFaults):
    """Runs one soak (``run()``); see the module docstring."""

    def __init__(self, cfg: Config, out=sys.stdout):
        from django.conf import settings

        from interlock_project.embedded_pg import EmbeddedPostgres

        pgdata = getattr(settings, "ILR_EMBEDDED_PGDATA", None)
        if not pgdata:
            raise RuntimeError("soak restarts the server: it needs the embedded PostgreSQL (no DATABASE_URL)")
        self.cfg = cfg
        self.out = out
        self.cluster = EmbeddedPostgres(pgdata)
        self.rng = random.Random(cfg.seed)
        self.rec = Record()
        self.stop = threading.Event()
        self.feeding = threading.Event()
        self.faulting = threading.Event()
        self.slots = [Slot(i) for i in range(cfg.workers)]
        self.slots_lock = threading.Lock()
        self.t0 = time.monotonic()
        # The targets' ledgers and the workers' logs: a directory per run, so runs never share one.
        (ROOT / ".data").mkdir(exist_ok=True)
        self.work_dir = Path(tempfile.mkdtemp(prefix="soak-", dir=ROOT / ".data"))
        self.targets: dict[int, str] = {}
        self.ledgers: dict[int, Path] = {}

    # -- plumbing ------------------------------------------------------------------------------

    def now(self) -> float:
        return time.monotonic() - self.t0

    def say(self, text: str) -> None:
        self.out.write(f"[{self.now():7.1f}s] {text}\n")
        self.out.flush()

    def _db(self, fn, what: str, attempts: int = 120):
        """Call ``fn(conn)`` on a fresh connection, again after a connection fault (the server
        restarts under the run), for about a minute; other errors propagate."""
        for _ in range(attempts):
            try:
                with db.connect(self.dsn, application_name="ilr-soak") as conn:
                    return fn(conn)
            except Exception as exc:  # noqa: BLE001 - sorted by db.is_connection_fault below
                if not (db.is_connection_fault(exc) or "connection" in str(exc).lower()):
                    raise
                self.rec.harness_errors[f"{what}: connection"] += 1
                time.sleep(0.5)
        raise RuntimeError(f"soak: {what}: no database connection for a minute")

    def _target(self, tier: int, path: str, body: dict) -> None:
        from demo.peers.targets_client import http_json

        http_json("POST", f"{self.targets[tier]}{path}", body, timeout=10)

    # -- workers -------------------------------------------------------------------------------

    def _spawn(self, slot: Slot, arm: bool) -> None:
        env = {**self.env, "ILR_MODEL_BASE_URL": self.model_url}
        slot.armed = None
        if arm:
            var = self.rng.choice(("ILR_KILL_AT", "ILR_STOP_AT"))
            point = self.rng.choice(POINTS)
            spec = f"{point}@{self.rng.randint(1, 4)}"
            env[var] = spec
            slot.armed = f"{'kill' if var == 'ILR_KILL_AT' else 'stop'}:{point}"
            self.rec.faults["armed_" + slot.armed.split(":")[0]] += 1
        slot.generation += 1
        log = open(self.work_dir / f"worker{slot.index}.log", "ab")
        # prove.harness.worker_shim runs manage.py's ilr_worker with kill-point SIGSTOPs made synchronous.
        slot.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "prove.harness.worker_shim",
                "ilr_worker",
                "--id",
                f"soak{slot.index}-{slot.generation}",
                "--import",
                "prove.harness.soak",
                "--lease-ttl",
                str(self.cfg.lease_ttl),
                "--poll",
                str(self.cfg.poll),
                "--concurrency",
                str(self.cfg.concurrency),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        slot.stopped_until = None

    def _supervise(self) -> None:
        """Keep every slot's worker alive; continue stopped ones after their hold."""
        from prove.peers.systems import proc_state

        while not self.stop.is_set():
            with self.slots_lock:
                for slot in self.slots:
                    p = slot.proc
                    if p is None:
                        continue
                    if p.poll() is not None:
                        if p.returncode == -signal.SIGKILL and slot.armed and slot.armed.startswith("kill:"):
                            self.rec.fired[slot.armed] += 1
                            self._fault("kill_point_fired")
                        elif p.returncode not in (-signal.SIGKILL, 0):
                            self.rec.harness_errors[f"worker exit {p.returncode}"] += 1
                        self._spawn(slot, arm=self.faulting.is_set() and self.rng.random() < self.cfg.arm_probability)
                        continue
                    if proc_state(p.pid) == "T":
                        if slot.stopped_until is None:
                            slot.stopped_until = time.monotonic() + 2 * self.cfg.lease_ttl
                            if slot.armed and slot.armed.startswith("stop:"):
                                self.rec.fired[slot.armed] += 1
                                self._fault("stop_point_fired")
                                slot.armed = None
                        elif time.monotonic() >= slot.stopped_until:
                            os.kill(p.pid, signal.SIGCONT)
                            slot.stopped_until = None
            time.sleep(0.2)

    def _fault(self, kind: str) -> None:
        self.rec.faults[kind] += 1
        self.rec.fault_times.append((round(self.now(), 1), kind))

    # -- feed ----------------------------------------------------------------------------------

    def _feed(self) -> None:
        from ilr import Runtime

        rt = Runtime(self.dsn)
        i = 0
        gap = 1 / self.cfg.rate
        next_at = time.monotonic()
        while self.feeding.is_set() and not self.stop.is_set():
            kind = ("refund_t1", "steps", "refund_t2", "steps")[i % 4]
            wf_id = f"{kind}-{i:06d}"
            try:
                self._start_one(rt, kind, wf_id)
                self.rec.started[kind] += 1
            except Exception as exc:  # noqa: BLE001 - counted; the run goes on
                self.rec.harness_errors[f"start {kind}: {type(exc).__name__}: {str(exc)[:80]}"] += 1
            i += 1
            next_at += gap
            self.stop.wait(max(0.0, next_at - time.monotonic()))
        rt.close()

    def _retrying(self, fn, what: str):
        for _ in range(120):
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - retried only on a connection fault
                if not (db.is_connection_fault(exc) or "connection" in str(exc).lower()):
                    raise
                self.rec.harness_errors[f"{what}: connection"] += 1
                time.sleep(0.5)
        raise RuntimeError(f"soak: {what}: no database connection for a minute")

    def _start_one(self, rt, kind: str, wf_id: str) -> None:
        if kind == "steps":
            self._retrying(lambda: rt.start("soak_steps", wf_id, {}), "start")
            self._retrying(lambda: rt.signal(wf_id, "go", {"n": 1}, sender="soak"), "signal")
            return
        tier = 1 if kind == "refund_t1" else 2
        payment = f"pay-{wf_id}"
        self._target(tier, "/admin/payments", {"id": payment, "paid": PAID})
        case = {
            "id": wf_id,
            "payment": payment,
            "paid": PAID,
            "reason": "item arrived damaged",
            "verify_after": 0,
            "approval_timeout": 3600,
            "target": {
                "url": self.targets[tier],
                "tier": tier,
                "queryable": True,
                "send_timeout": self.cfg.send_timeout,
                "settle_margin": self.cfg.settle_margin,
            },
        }
        self._retrying(lambda: rt.start("refund", wf_id, case), "start")

    def _approve(self) -> None:
        """Approve each pending approval request, as a person in the review UI does: the
        request's exact payload and premises; the two-person rule as the request says."""
        from ilr import InterlockError, Runtime

        rt = Runtime(self.dsn)
        while not self.stop.is_set():
            try:
                pending = self._retrying(lambda: rt.approval_requests("pending", limit=50), "approver")
                for req in pending:
                    try:
                        for by in ("soak-approver", "soak-second")[: req["approvals_needed"]]:
                            after = rt.approve_request(req["id"], by=by)
                            if after["status"] == "approved":
                                self.rec.approvals += 1
                                break
                    except InterlockError as exc:  # decided a moment ago (an answer lost to a restart)
                        self.rec.harness_errors[f"approve: {type(exc).__name__}"] += 1
            except Exception as exc:  # noqa: BLE001 - counted; the next round tries again
                self.rec.harness_errors[f"approver: {type(exc).__name__}"] += 1
                rt.close()
            self.stop.wait(0.5)
        rt.close()

    # -- observation ---------------------------------------------------------------------------

    def _statuses(self) -> dict:
        return self._db(
            lambda c: {r["status"]: r["n"] for r in c.execute(SOAK_STATUS_COUNTS).fetchall()},
            "sample",
        )

    def _sample(self) -> None:
        while not self.stop.wait(10):
            try:
                self.rec.samples.append((round(self.now(), 1), self._statuses()))
            except Exception as exc:  # noqa: BLE001
                self.rec.harness_errors[f"sample: {type(exc).__name__}"] += 1

    def evidence(self) -> dict:
        """Both targets' ledgers and access logs, as the invariants registry reads them."""
        from ilr.management.commands.ilr_check import load_target_evidence

        ledger, log = [], []
        for tier in (1, 2):
            ev = load_target_evidence(str(self.ledgers[tier]))
            ledger += ev["ledger"]
            log += ev["access_log"] or []
        return {"ledger": ledger, "access_log": log}

    def check(self) -> dict:
        """The invariants registry over the database, with the targets' files read after the
        database snapshot (an effect committed in the snapshot was applied before its commit,
        so its ledger row is in the later read). Returns only the violated invariants."""
        from ilr._invariants import Snapshot, check_snapshot, violations

        def body(conn):
            snap = Snapshot.load(conn)
            snap.evidence = self.evidence()
            return violations(check_snapshot(snap))

        return self._db(body, "check")

    def _checker(self) -> None:
        while not self.stop.wait(self.cfg.check_every):
            try:
                found = self.check()
            except Exception as exc:  # noqa: BLE001
                self.rec.harness_errors[f"check: {type(exc).__name__}: {str(exc)[:80]}"] += 1
                continue
            self.rec.checks.append((round(self.now(), 1), {k: len(v) for k, v in found.items()}))
            self.say(f"check: {'0 violations' if not found else found}")

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> dict:
        """Run the soak; returns the report (also written by ``write_results``)."""
        from demo.peers.model_stub import model_stub_process
        from demo.peers.target import target_process
        from prove.bench.core import fresh_database

        cfg = self.cfg
        self.env = fresh_database(SOAK_DB)
        base = db.conninfo()
        self.dsn = base.replace(f"dbname={base.split('dbname=')[1].split()[0]}", f"dbname={SOAK_DB}")
        threads: list[threading.Thread] = []
        with contextlib.ExitStack() as stack:
            for tier in (1, 2):
                self.ledgers[tier] = self.work_dir / f"ledger-t{tier}.sqlite"
                for suffix in ("", ".access.jsonl", "-wal", "-shm"):
                    Path(f"{self.ledgers[tier]}{suffix}").unlink(missing_ok=True)
                self.targets[tier] = stack.enter_context(
                    target_process(tier=tier, ledger=self.ledgers[tier], queryable=True)
                )
            self.model_url = stack.enter_context(model_stub_process())
            stack.callback(self._stop_workers)
            with self.slots_lock:
                for slot in self.slots:
                    self._spawn(slot, arm=False)
            self.t0 = time.monotonic()
            self.feeding.set()
            self.faulting.set()
            for fn in (self._supervise, self._inject, self._feed, self._approve, self._sample, self._checker):
                t = threading.Thread(target=fn, name=fn.__name__, daemon=True)
                t.start()
                threads.append(t)
            self.say(f"soak: {cfg.minutes} min, {cfg.rate} wf/s, {cfg.workers} workers x {cfg.concurrency}")
            end_at = self.t0 + cfg.minutes * 60
            while time.monotonic() < end_at:
                time.sleep(min(10.0, max(0.0, end_at - time.monotonic())))
            # Quiesce: no new work, no new faults, every target healthy, every worker running.
            self.feeding.clear()
            self.faulting.clear()
            feed_end = self.now()
            for tier in (1, 2):
                for path, body in (("/admin/blackhole", {"on": False}), ("/admin/delay", {"seconds": 0})):
                    self._target(tier, path, body)
            self.say("soak: feed and faults stopped; draining")
            drained, left = self._drain(cfg.drain_timeout)
            self.stop.set()
            for t in threads:
                t.join(timeout=60)
            for tier in (1, 2):
                for path, body in (("/admin/blackhole", {"on": False}), ("/admin/delay", {"seconds": 0})):
                    self._target(tier, path, body)
            final = self.check()
            report = collect_report(self, feed_end, drained, left, final)
        return report

    def _drain(self, timeout: float) -> tuple[float | None, dict]:
        """Wait until no workflow is left unended; returns (seconds it took or None, the
        unended ones by status)."""
        start = time.monotonic()
        while True:
            left = self._db(
                lambda c: {r["status"]: r["n"] for r in c.execute(SOAK_ACTIVE_STATUS_COUNTS).fetchall()},
                "drain",
            )
            if not left:
                return round(time.monotonic() - start, 1), {}
            if time.monotonic() - start > timeout:
                return None, left
            time.sleep(1)

    def _stop_workers(self) -> None:
        with self.slots_lock:
            for slot in self.slots:
                p = slot.proc
                if p is None or p.poll() is not None:
                    continue
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)
                    p.terminate()
            for slot in self.slots:
                p = slot.proc
                if p is None:
                    continue
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(10)
