"""A long run under faults: ``python manage.py soak --minutes M``.

On a fresh database (``ilr_soak``) of the embedded PostgreSQL, W ``ilr_worker`` subprocesses run,
at a steady rate, the refund workflow (``prove.workflows.refund``: the model stub decides, the workflow asks for
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
"""

from __future__ import annotations

import contextlib
import json
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

ROOT = Path(__file__).resolve().parents[2]
SOAK_DB = "ilr_soak"
RESULTS = ROOT / "results" / "runtime_soak"
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


class Soak:
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

    # -- faults --------------------------------------------------------------------------------

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
            lambda c: {
                r["status"]: r["n"]
                for r in c.execute("select status, count(*) as n from ilr.workflows group by status").fetchall()
            },
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
            report = self._report(feed_end, drained, left, final)
        return report

    def _drain(self, timeout: float) -> tuple[float | None, dict]:
        """Wait until no workflow is left unended; returns (seconds it took or None, the
        unended ones by status)."""
        start = time.monotonic()
        while True:
            left = self._db(
                lambda c: {
                    r["status"]: r["n"]
                    for r in c.execute(
                        "select status, count(*) as n from ilr.workflows where status not in "
                        "('completed','failed','cancelled','stuck','continued') group by status"
                    ).fetchall()
                },
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

    def _report(self, feed_end: float, drained: float | None, left: dict, final: dict) -> dict:
        def body(conn):
            q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
            return {
                "workflows": {
                    f"{r['name']}:{r['status']}": r["n"]
                    for r in q("select name, status, count(*) as n from ilr.workflows group by 1, 2 order by 1, 2")
                },
                "effects": {
                    f"t{r['tier']}:{r['state']}": r["n"]
                    for r in q("select tier, state, count(*) as n from ilr.effects group by 1, 2 order by 1, 2")
                },
                "outcomes": {
                    r["status"] or "none": r["n"]
                    for r in q(
                        "select result->>'status' as status, count(*) as n from ilr.workflows "
                        "where name = 'refund' group by 1 order by 1"
                    )
                },
                "takeovers": q(
                    "select count(*) as n, coalesce(max(k), 0) as max_per_workflow from ("
                    "select workflow_id, count(*) as k from ilr.claims where prev_status = 'running' "
                    "group by 1) t"
                )[0],
                "claims": q("select count(*) as n from ilr.claims")[0]["n"],
                "sends": q("select coalesce(sum(sends), 0) as n from ilr.effects")[0]["n"],
            }

        db_view = self._db(body, "report")
        ev = self.evidence()
        per_effect: dict[str, int] = Counter(r["effect_id"] for r in ev["ledger"] if r.get("effect_id"))
        ledger_tier = {}
        for tier in (1, 2):
            from ilr.management.commands.ilr_check import load_target_evidence

            for r in load_target_evidence(str(self.ledgers[tier]))["ledger"]:
                ledger_tier[r["effect_id"]] = tier
        dups = Counter(f"t{ledger_tier[e]}" for e, n in per_effect.items() if n > 1)
        throughput = []
        prev = None
        for t, counts in self.rec.samples:
            done = sum(n for s, n in counts.items() if s in ("completed", "failed", "cancelled", "stuck"))
            if prev is not None and t > prev[0]:
                throughput.append((t, round((done - prev[1]) / (t - prev[0]) * 60, 1)))
            prev = (t, done)
        cfg = self.cfg
        return {
            "config": cfg.__dict__,
            "feed_seconds": round(feed_end, 1),
            "drain_seconds": drained,
            "unended_after_drain": left,
            "started": dict(self.rec.started),
            "started_total": sum(self.rec.started.values()),
            "approvals": self.rec.approvals,
            "faults": dict(sorted(self.rec.faults.items())),
            "kill_points_fired": dict(sorted(self.rec.fired.items())),
            "workflows": db_view["workflows"],
            "effects": db_view["effects"],
            "refund_outcomes": db_view["outcomes"],
            "takeovers": db_view["takeovers"],
            "claims": db_view["claims"],
            "sends": db_view["sends"],
            "ledger_applications": len(ev["ledger"]),
            "duplicates": {"t1": dups.get("t1", 0), "t2": dups.get("t2", 0)},
            "violations_final": {k: v[:5] for k, v in final.items()},
            "violations_periodic": [c for c in self.rec.checks if c[1]],
            "checks_run": len(self.rec.checks) + 1,
            "throughput_per_min": throughput,
            "fault_times": self.rec.fault_times,
            "harness_errors": dict(self.rec.harness_errors),
            "work_dir": str(self.work_dir.relative_to(ROOT)),
        }


def write_results(report: dict, command: str, out_dir: Path | None = None) -> Path:
    """Write runtime_soak.{json,md,png} (the plot: throughput over time with the faults) to
    ``out_dir`` (default results/).

    Returns:
        the .md path.
    """
    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
        or "unknown"
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    report = {
        **report,
        "command": command,
        "commit": commit + ("+uncommitted" if dirty else ""),
        "machine": f"{os.cpu_count()} cores",
    }
    base = (Path(out_dir) / RESULTS.name) if out_dir is not None else RESULTS
    base.parent.mkdir(parents=True, exist_ok=True)
    base.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    _plot(report, base.with_suffix(".png"))
    base.with_suffix(".md").write_text(render(report) + "\n")
    return base.with_suffix(".md")


def _unended(report: dict) -> int:
    return sum(report["unended_after_drain"].values())


def render(report: dict) -> str:
    """The Markdown report of one soak run."""
    cfg = report["config"]
    stuck = sum(n for k, n in report["workflows"].items() if k.endswith(":stuck"))
    failed = sum(n for k, n in report["workflows"].items() if k.endswith(":failed"))
    ended = sum(
        n for k, n in report["workflows"].items() if k.split(":")[1] in ("completed", "failed", "cancelled", "stuck")
    )
    drain_note = (
        report["drain_seconds"]
        and "after a drain of " + str(report["drain_seconds"]) + " s"
        or "when the drain timed out"
    )
    verdict = [
        f"- invariant violations: **{sum(len(v) for v in report['violations_final'].values())}** at the end, "
        f"{len(report['violations_periodic'])} periodic checks with any (of {report['checks_run']} checks run)",
        f"- duplicates (a ledger applying one effect more than once): tier 1 **{report['duplicates']['t1']}**, "
        f"tier 2 **{report['duplicates']['t2']}**",
        f"- workflows: {report['started_total']} started, {ended} ended, **{stuck}** stuck, {failed} failed, "
        f"**{_unended(report)}** not ended {drain_note}",
    ]
    lines = [
        f"# Soak: {cfg['minutes']:g} minutes of work under faults",
        "",
        f"Made by `{report['command']}` at commit {report['commit']} on {report['machine']} "
        f"(the embedded PostgreSQL; the targets' faults are EMULATED: blackhole, delay, lost answer). "
        f"Workers' logs and the targets' ledgers: {report['work_dir']}.",
        "",
        *verdict,
        "",
        "## Configuration",
        "",
        f"{cfg['minutes']} minutes of feed at {cfg['rate']} workflows/s (refund at tier 1, soak_steps, refund at "
        f"tier 2, soak_steps, in turn), {cfg['workers']} workers x concurrency {cfg['concurrency']}, lease "
        f"{cfg['lease_ttl']} s, poll {cfg['poll']} s, send timeout {cfg['send_timeout']} s, settle margin "
        f"{cfg['settle_margin']} s; a worker or target fault every {cfg['fault_every']} s on average, a restarted "
        f"worker armed with a kill or stop point with probability {cfg['arm_probability']}, PostgreSQL crashed "
        f"every {cfg['pg_restart_every']} s, invariants every {cfg['check_every']} s; seed {cfg['seed']}. Feed "
        f"ran {report['feed_seconds']} s.",
        "",
        "## Faults injected",
        "",
        "| kind | count |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in report["faults"].items()],
        "",
        "Kill and stop points that fired (armed worker reached the point): "
        + (", ".join(f"{k} x{v}" for k, v in report["kill_points_fired"].items()) or "none")
        + ".",
        "",
        "## Outcomes",
        "",
        "| workflow:status | count |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in report["workflows"].items()],
        "",
        "| effect tier:state | count |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in report["effects"].items()],
        "",
        "Refund results: " + ", ".join(f"{k} {v}" for k, v in report["refund_outcomes"].items()) + ".",
        "",
        f"Approvals given: {report['approvals']}. Claims: {report['claims']}; takeovers (a claim of a running "
        f"workflow whose lease had lapsed): {report['takeovers']['n']} workflows, at most "
        f"{report['takeovers']['max_per_workflow']} for one. Sends: {report['sends']}; ledger applications: "
        f"{report['ledger_applications']}.",
        "",
        "## Throughput",
        "",
        "![throughput over time](runtime_soak.png)",
        "",
        "Workflows ended per minute, sampled every 10 s (the plot marks PostgreSQL crashes in red and other "
        "faults as ticks).",
        "",
    ]
    if report["violations_final"] or report["violations_periodic"]:
        lines += [
            "## Violations",
            "",
            "```",
            json.dumps(
                {"final": report["violations_final"], "periodic": report["violations_periodic"]}, indent=2, default=str
            ),
            "```",
            "",
        ]
    if report["harness_errors"]:
        lines += [
            "## Harness retries and errors",
            "",
            "Calls of the harness itself (start, signal, approve, sample) retried after a connection fault "
            "or failed; not the runtime's.",
            "",
            "| what | count |",
            "|---|---|",
            *[f"| {k} | {v} |" for k, v in sorted(report["harness_errors"].items())],
            "",
        ]
    return "\n".join(lines)


def _plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = report["throughput_per_min"]
    fig, ax = plt.subplots(figsize=(10, 4))
    if pts:
        ax.plot([p[0] / 60 for p in pts], [p[1] for p in pts], lw=1, color="tab:blue", label="ended / min")
    for t, kind in report["fault_times"]:
        if kind == "pg_restart_immediate":
            ax.axvline(t / 60, color="tab:red", lw=1, alpha=0.7)
        else:
            ax.axvline(t / 60, ymin=0, ymax=0.04, color="gray", lw=1)
    ax.set_xlabel("minutes")
    ax.set_ylabel("workflows ended per minute")
    ax.set_title("soak: throughput under faults (red: PostgreSQL crash and restart)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
