"""The three systems under test (docs/protocol.md §16.1), each behind the same small driver
interface.

- ``RuntimeSystem``: the refund workflow of demo.workflows on the runtime, ``manage.py
  ilr_worker`` subprocesses (lease_ttl 5, poll 0.5, send_timeout 3, settle_margin 5).
- ``TemporalSystem(mode="a"|"b")`` (prove/peers/temporal_system.py): prove.peers.temporal_baselines
  on the Temporal dev server, ``python -m prove.peers.temporal_baselines worker`` subprocesses, one
  task queue per run.

A driver starts and kills worker subprocesses (real signals), starts the case, approves,
revokes, resets, waits for the system's own reported outcome, and hands its own records to the
auditor. Nothing here reads the target's ledger (that is the oracle's job).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from prove.harness import audit
from prove.queries import (
    RECORDS_CLAIMS,
    RECORDS_EFFECT_IDS,
    RECORDS_EFFECTS,
    RECORDS_LLM_CALLS,
    RECORDS_SIGNALS,
    RECORDS_STEPS,
    RECORDS_WORKFLOWS,
)

ROOT = Path(__file__).resolve().parents[2]
LEASE_TTL, POLL, SEND_TIMEOUT, SETTLE_MARGIN = 5.0, 0.5, 3.0, 5.0  # docs/protocol.md §16.1
APPROVER = "alice"


def proc_state(pid: int) -> str:
    """The /proc state letter ("T" stopped, "Z" zombie), or "X" when gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return "X"


class AsyncBridge:
    """One event loop in a daemon thread; ``call(coro, timeout)`` runs a coroutine on it."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="prove-asyncio")
        self.thread.start()

    def call(self, coro, timeout: float = 60.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class System:
    """Common worker-process bookkeeping."""

    name = ""

    def __init__(self, run):
        self.run = run
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self._n = 0

    # -- processes -------------------------------------------------------------------------

    def _spawn(self, wid: str, cmd: list[str], env: dict) -> subprocess.Popen:
        log_path = self.run.workdir / f"{wid}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.procs[wid] = proc
        self.logs[wid] = log_path
        self.run.fault(
            "worker_start", worker=wid, pid=proc.pid, kill_at=env.get("ILR_KILL_AT"), stop_at=env.get("ILR_STOP_AT")
        )
        return proc

    def next_id(self) -> str:
        self._n += 1
        return f"w{self._n}"

    def alive(self) -> list[str]:
        return [w for w, p in self.procs.items() if p.poll() is None]

    def wait_killed(self, timeout: float = 60.0) -> str:
        """Wait until a worker died of SIGKILL at its kill point; returns its id."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for wid, p in self.procs.items():
                if p.poll() == -signal.SIGKILL and wid not in self.run.killed:
                    self.run.killed.add(wid)
                    self.run.fault("killed_at_point", worker=wid)
                    return wid
            time.sleep(0.05)
        raise TimeoutError(f"no worker reached its kill point within {timeout} s")

    def wait_stopped(self, timeout: float = 60.0, exclude=()) -> str:
        """Wait until a worker stopped itself (SIGSTOP at its stop point); returns its id."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for wid, p in self.procs.items():
                if wid not in exclude and p.poll() is None and proc_state(p.pid) == "T":
                    self.run.fault("stopped_at_point", worker=wid)
                    return wid
            time.sleep(0.02)
        raise TimeoutError(f"no worker reached its stop point within {timeout} s")

    def sigcont(self, wid: str) -> None:
        p = self.procs[wid]
        if p.poll() is None:
            os.kill(p.pid, signal.SIGCONT)
            self.run.fault("sigcont", worker=wid)

    def sigkill(self, wid: str) -> None:
        p = self.procs[wid]
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            os.kill(p.pid, signal.SIGCONT) if proc_state(p.pid) == "T" else None
            p.wait(10)
            self.run.fault("sigkill", worker=wid)

    def down(self) -> None:
        """Every worker subprocess of this system is SIGKILLed."""
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.wait(10)
        self.run.fault("down")

    def stop_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(8)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    def worker_env(self, kill_at=None, stop_at=None, extra=None) -> dict:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "ILR_MODEL_BASE_URL": self.run.model_url}
        for var in ("ILR_KILL_AT", "ILR_STOP_AT", "ILR_TARGET_URL", "ILR_TARGET_TIER"):
            env.pop(var, None)
        if kill_at:
            env["ILR_KILL_AT"] = kill_at
        if stop_at:
            env["ILR_STOP_AT"] = stop_at
        env.update(extra or {})
        return env

    def point(self, name: str) -> str:
        return name


class RuntimeSystem(System):
    """The runtime: demo.workflows.refund (or prove.harness.prove_flows.refund_timer) on ilr workers."""

    name = "runtime"

    def __init__(self, run):
        super().__init__(run)
        self.rt = run.infra.rt
        self.workflow = "refund_signal"
        self.wf_id = run.case_id
        self.grant_id = None
        self.proposal = None
        self.facts = None

    def start_worker(
        self, kill_at=None, stop_at=None, db_url: str | None = None, wid: str | None = None, concurrency: int = 2
    ):
        wid = wid or self.next_id()
        extra = {}
        if db_url:
            extra["DATABASE_URL"] = db_url
        # prove.harness.worker_shim runs manage.py's ilr_worker with kill-point SIGSTOPs made synchronous.
        cmd = [
            sys.executable,
            "-m",
            "prove.harness.worker_shim",
            "ilr_worker",
            "--id",
            f"{self.run.run_id}-{wid}",
            "--lease-ttl",
            str(LEASE_TTL),
            "--poll",
            str(POLL),
            "--concurrency",
            str(concurrency),
            "--import",
            "prove.harness.prove_flows",
            "--allow-code-change",
        ]
        self._spawn(wid, cmd, self.worker_env(kill_at, stop_at, extra))
        return wid

    def case(self, target_url: str, tier: int, queryable: bool, **extra) -> dict:
        target = {
            "url": target_url,
            "tier": tier,
            "queryable": queryable,
            "send_timeout": SEND_TIMEOUT,
            "settle_margin": SETTLE_MARGIN,
        }
        if extra.pop("dedup_window", None):
            target["dedup_window"] = self.run.dedup_window
        return {
            "id": self.wf_id,
            "payment": self.run.payment,
            "paid": self.run.paid,
            "reason": "item arrived damaged",
            "verify_after": 0,
            "target": target,
            **extra,
        }

    def start(self, case: dict) -> None:
        self.rt.start(self.workflow, self.wf_id, case)
        self.run.fault("start", workflow=self.workflow)

    def wait_proposal(self, timeout: float = 60.0, wf_id: str | None = None) -> dict:
        wf_id = wf_id or self.wf_id
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = self.rt.describe(wf_id)
            if d["status"] in ("failed", "stuck", "completed", "cancelled"):
                raise RuntimeError(f"{wf_id} ended {d['status']} before approval: {d['error']}")
            w = d["waiting"] or {}
            if d["status"] == "sleeping" and w.get("signal") == "approve":
                steps = {s["name"]: s for s in d["steps"]}
                self.proposal = steps["propose"]["output"]
                self.facts = steps["pick_amount"]["output"]["premises"]
                return self.proposal
            time.sleep(0.05)
        raise TimeoutError(f"{wf_id} did not ask for approval within {timeout} s")

    def approve(self, wf_id: str | None = None, payload: dict | None = None) -> str:
        wf_id = wf_id or self.wf_id
        payload = payload or self.proposal
        self.grant_id = self.rt.approve(wf_id, payload, self.facts, by=APPROVER)
        self.run.approved_amount = payload["amount"]
        self.run.approved_amounts.append(payload["amount"])
        self.run.approved_at = time.time()
        self.run.fault("approve", grant=self.grant_id, amount=payload["amount"])
        return self.grant_id

    def signal_approval_raw(self, amount: int) -> None:
        """An approve signal sent without waiting for the suspend (S11r): a policy grant
        capped at the amount plus the signal, the same payload approve() would carry."""
        from ilr import grant_in

        payload = {"payment": self.run.payment, "amount": amount}
        self.grant_id = self.rt._tx(grant_in, self.wf_id, "refund", by=APPROVER, max_cents=amount)
        facts = {"payment": self.run.payment, "eligible": True, "refunded_by_others": 0}
        self.rt.signal(
            self.wf_id,
            "approve",
            {"grant_id": self.grant_id, "payload": payload, "facts_seen": facts, "approved_by": APPROVER},
            sender=APPROVER,
        )
        self.run.approved_amount = amount
        self.run.approved_amounts.append(amount)
        self.run.approved_at = time.time()
        self.run.fault("approve_signal", grant=self.grant_id)

    def revoke(self) -> list[str]:
        returned = self.rt.revoke(self.grant_id, by="bob")
        self.run.fault("revoke", grant=self.grant_id, returned=returned)
        return returned

    def result(self, timeout: float = 90.0, wf_id: str | None = None) -> dict:
        from ilr import WorkflowFailed

        wf_id = wf_id or self.wf_id
        try:
            r = self.rt.result(wf_id, timeout=timeout)
            return {"status": r.get("status") if isinstance(r, dict) else str(r), "result": r}
        except WorkflowFailed as exc:
            return {
                "status": f"workflow {exc.status}" if hasattr(exc, "status") else "workflow failed",
                "error": str(exc),
            }
        except TimeoutError as exc:
            d = self.rt.describe(wf_id)
            return {"status": "timeout", "error": str(exc), "workflow_status": d["status"], "waiting": d["waiting"]}

    def effect_ids(self) -> list[str]:
        conn = self.rt.connection()
        with self.rt._lock:
            rows = conn.execute(RECORDS_EFFECT_IDS, ([self.wf_id] + self.run.extra_wf_ids,)).fetchall()
        return sorted({r["effect_id"] for r in rows})

    def records(self) -> dict:
        """The system's own records for the run JSON (steps, effects, claims, llm calls)."""
        conn = self.rt.connection()
        ids = [self.wf_id] + self.run.extra_wf_ids
        with self.rt._lock:
            q = lambda sql: conn.execute(sql, (ids,)).fetchall()  # noqa: E731
            out = {
                "workflows": q(RECORDS_WORKFLOWS),
                "steps": q(RECORDS_STEPS),
                "claims": q(RECORDS_CLAIMS),
                "effects": q(RECORDS_EFFECTS),
                "signals": q(RECORDS_SIGNALS),
            }
            try:
                out["llm_calls"] = q(RECORDS_LLM_CALLS)
            except Exception:  # noqa: BLE001 - column names differ across versions
                conn.rollback() if not conn.autocommit else None
                out["llm_calls"] = None
        return json.loads(json.dumps(out, default=str))

    def audit(self) -> dict:
        eids = self.effect_ids()
        if not eids:
            return audit.audit_runtime(None)
        # The case's own effect (the fork reuses the same effect id: the key is per case).
        return audit.audit_runtime(self.rt.receipt(eids[0]))

    def fork_at_decide(self, new_id: str) -> str:
        d = self.rt.describe(self.wf_id)
        seq = next(s["seq"] for s in d["steps"] if s["kind"] == "decide")
        self.rt.fork(self.wf_id, seq, new_id)
        self.run.extra_wf_ids.append(new_id)
        self.run.fault("fork", at_seq=seq, new_id=new_id)
        return new_id

    def cleanup(self) -> None:
        self.stop_all()
        for wf in [self.wf_id] + self.run.extra_wf_ids:
            try:
                d = self.rt.describe(wf)
                if d["status"] not in ("completed", "failed", "cancelled", "stuck", "continued"):
                    self.rt.cancel(wf, by="prove-cleanup")
            except Exception:  # noqa: BLE001 - best effort
                pass
