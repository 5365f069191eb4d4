"""The harness's driver for baseline (c), DBOS Transact (prove/peers/dbos_baseline.py), behind the
same interface as the runtime's and Temporal's drivers (prove/peers/systems.py).

A run's DBOS process has an executor id of its own (``<run id>-<worker id>``); a restart takes
the same executor id, because DBOS recovers at launch the PENDING workflows of the executor id
it launches with. The harness starts the case with ``DBOSClient.enqueue`` on the worker's queue,
reads the proposal and phase from the workflow's events, approves with ``DBOSClient.send``, and
re-decides with ``DBOSClient.fork_workflow`` from the decide step (DBOS's counterpart of
Temporal's reset). Its records are DBOS's step checkpoints (``dbos.operation_outputs``) and the
attempt log.
"""

from __future__ import annotations

import sys
import time

from prove.harness import audit
from prove.peers.systems import APPROVER, SEND_TIMEOUT, System

MODULE = "prove.peers.dbos_baseline"


class DbosSystem(System):
    """Baseline (c): the refund workflow on DBOS, with (b)'s pre-send check."""

    name = "dbos"

    def __init__(self, run):
        super().__init__(run)
        self.infra = run.infra
        self.wf_id = run.case_id
        self.wf_ids = [run.case_id]
        self.grant_id = None
        self.proposal = None
        self.attempt_log = run.workdir / "attempts.jsonl"
        self.slots: list[list[str]] = []  # [executor id, worker id]

    @property
    def client(self):
        return self.infra.dbos_client()

    def point(self, name: str) -> str:
        # As for Temporal: "T_dispatch committed; no bytes sent" has no DBOS counterpart other
        # than "before the HTTP send".
        base, at, n = name.partition("@")
        return {"effect_after_dispatch": "effect_before_dispatch"}.get(base, base) + at + n

    def start_worker(
        self, kill_at=None, stop_at=None, url: str | None = None, wid: str | None = None, wait_ready: bool = True
    ):
        wid = wid or self.next_id()
        env = self.worker_env(
            kill_at and self.point(kill_at),
            stop_at and self.point(stop_at),
            {
                "ILR_TARGET_URL": self.run.worker_target_url,
                "ILR_TARGET_TIER": str(self.run.tier),
                "ILR_TARGET_QUERYABLE": "1" if self.run.queryable else "0",
                "ILR_SEND_TIMEOUT": str(SEND_TIMEOUT),
                "ILR_PROVE_DSN": self.infra.dsn,
                "ILR_ATTEMPT_LOG": str(self.attempt_log),
            },
        )
        cmd = [
            sys.executable,
            "-m",
            MODULE,
            "worker",
            "--url",
            url or self.infra.dbos_url,
            "--id",
            self._executor_for(wid),
        ]
        self._spawn(wid, cmd, env)
        if wait_ready:
            self._wait_ready(wid)
        return wid

    def _executor_for(self, wid: str) -> str:
        """The executor id of a new process. DBOS recovers, at launch, the PENDING workflows of the
        executor id it launches with, and each process needs an id of its own: so a start after
        a process died takes over the dead process's id (a restart of it), and a start while
        every earlier process lives (a second worker) gets a new id."""
        for slot in self.slots:
            if self.procs[slot[1]].poll() is not None:
                slot[1] = wid
                return slot[0]
        self.slots.append([f"{self.run.run_id}-e{len(self.slots) + 1}", wid])
        return self.slots[-1][0]

    def url_via(self, address: str) -> str:
        """The system database's URL through a TCP proxy at ``address`` ("host:port")."""
        import urllib.parse

        parts = urllib.parse.urlsplit(self.infra.dbos_url)
        user = parts.netloc.rsplit("@", 1)[0]
        return urllib.parse.urlunsplit((parts.scheme, f"{user}@{address}", parts.path, "", ""))

    def _wait_ready(self, wid: str, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[wid].poll() is not None:
                raise RuntimeError(
                    f"dbos worker {wid} exited {self.procs[wid].returncode}: "
                    f"{self.logs[wid].read_text(errors='replace')[-2000:]}"
                )
            if b"ready" in self.logs[wid].read_bytes():
                return
            time.sleep(0.05)
        raise TimeoutError(f"dbos worker {wid} not ready in {timeout} s")

    def case(self, target_url: str, tier: int, queryable: bool, **extra) -> dict:
        extra.pop("dedup_window", None)
        return {
            "id": self.wf_id,
            "payment": self.run.payment,
            "paid": self.run.paid,
            "reason": "item arrived damaged",
            "send_timeout": SEND_TIMEOUT,
            **extra,
        }

    def start(self, case: dict) -> None:
        from dbos import EnqueueOptions

        from prove.peers.dbos_baseline import QUEUE_NAME, WORKFLOW_NAME

        options: EnqueueOptions = {"queue_name": QUEUE_NAME, "workflow_name": WORKFLOW_NAME, "workflow_id": self.wf_id}
        self.client.enqueue(options, case)
        self.run.fault("start", workflow=WORKFLOW_NAME)

    def _event(self, key: str, wf_id: str | None = None, timeout: float = 0.5):
        return self.client.get_event(wf_id or self.wf_id, key, timeout_seconds=timeout)

    def wait_proposal(self, timeout: float = 60.0, wf_id: str | None = None) -> dict:
        from prove.peers.dbos_baseline import PHASE_EVENT, PROPOSAL_EVENT

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proposal, phase = self._event(PROPOSAL_EVENT, wf_id), self._event(PHASE_EVENT, wf_id, 0.1)
            if proposal and phase == "waiting_approval":
                self.proposal = proposal
                return proposal
            time.sleep(0.1)
        raise TimeoutError(f"{wf_id or self.wf_id} did not ask for approval within {timeout} s")

    def phase(self) -> str | None:
        from prove.peers.dbos_baseline import PHASE_EVENT

        try:
            return self._event(PHASE_EVENT, timeout=0.1)
        except Exception:  # noqa: BLE001 - the system database is down (S10's crash)
            return None

    def approve(self, wf_id: str | None = None, payload: dict | None = None) -> str:
        payload = payload or self.proposal
        self.grant_id = self.infra.rt.grant(wf_id or self.wf_id, "refund", max_cents=payload["amount"], by=APPROVER)
        self._send({"grant_id": self.grant_id, "approved_amount": payload["amount"]}, wf_id)
        self.run.approved_amount = payload["amount"]
        self.run.approved_amounts.append(payload["amount"])
        self.run.approved_at = time.time()
        self.run.fault("approve", grant=self.grant_id, amount=payload["amount"])
        return self.grant_id

    def signal_approval_raw(self, amount: int) -> None:
        self.grant_id = self.infra.rt.grant(self.wf_id, "refund", max_cents=amount, by=APPROVER)
        self._send({"grant_id": self.grant_id, "approved_amount": amount})
        self.run.approved_amount = amount
        self.run.approved_amounts.append(amount)
        self.run.approved_at = time.time()
        self.run.fault("approve_signal", grant=self.grant_id)

    def _send(self, message: dict, wf_id: str | None = None) -> None:
        from prove.peers.dbos_baseline import APPROVE_TOPIC

        self.client.send(wf_id or self.wf_id, message, topic=APPROVE_TOPIC)

    def revoke(self) -> list[str]:
        # The same revoked_at update on ilr.grants as for (a) and (b) (scenario S03).
        returned = self.infra.rt.revoke(self.grant_id, by="bob")
        self.run.fault("revoke", grant=self.grant_id, returned=returned)
        return []

    def result(self, timeout: float = 90.0, wf_id: str | None = None, **_) -> dict:
        deadline = time.monotonic() + timeout
        wf_id = wf_id or self.wf_id
        while time.monotonic() < deadline:
            try:
                status = self.client.retrieve_workflow(wf_id).get_status()
            except Exception:  # noqa: BLE001 - the system database is down, or no row yet
                status = None
            if status is not None and status.status == "SUCCESS":
                r = self.client.retrieve_workflow(wf_id).get_result()
                return {"status": r.get("status"), "result": r}
            if status is not None and status.status in ("ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
                return {"status": "workflow failed", "error": f"{status.status}: {status.error!r}"}
            time.sleep(0.1)
        return {"status": "timeout", "error": f"not finished in {timeout} s"}

    def fork_at_decide(self, new_id: str | None = None) -> str:
        """DBOS's fork from the decide step (``new_id`` is ignored: DBOS picks the fork's id).
        The fork re-runs the decision and everything after it on the worker's queue; a message
        sent to the original is not delivered to the fork, so the fork asks for approval again,
        as the runtime's fork does. Returns the fork's workflow id."""
        return self.reset_to_decide()

    def reset_to_decide(self) -> str:
        """DBOS's fork from the decide step: a new workflow (DBOS picks its id) that re-runs the
        decision and everything after it, on the worker's queue."""
        from ilr import _db as db
        from prove.peers.dbos_baseline import QUEUE_NAME

        with db.connect(self.infra.dbos_dsn) as conn:
            step = conn.execute(
                "select min(function_id) as s from dbos.operation_outputs where workflow_uuid = %s "
                "and function_name like '%%decide'",
                (self.wf_id,),
            ).fetchone()["s"]
        handle = self.client.fork_workflow(self.wf_id, step, queue_name=QUEUE_NAME)
        self.wf_ids.append(handle.workflow_id)
        self.run.extra_wf_ids.append(handle.workflow_id)
        self.run.fault("fork", at_step=step, new_id=handle.workflow_id)
        return handle.workflow_id

    def histories(self) -> list[dict]:
        """One summary per workflow id of the run, from DBOS's step checkpoints."""
        from ilr import _db as db
        from prove.peers import dbos_baseline  # noqa: F401 - the step names below are its functions

        out = []
        try:
            with db.connect(self.infra.dbos_dsn) as conn:
                for wf in self.wf_ids:
                    rows = conn.execute(
                        "select function_name, output, serialization, error, started_at_epoch_ms "
                        "from dbos.operation_outputs where workflow_uuid = %s order by function_id",
                        (wf,),
                    ).fetchall()
                    out.append({"run_id": wf, **dbos_steps_summary(rows)})
        except Exception as exc:  # noqa: BLE001
            return [
                {
                    "run_id": None,
                    "error": repr(exc),
                    "refund_completed": False,
                    "refund_failed": False,
                    "refund_attempt": 0,
                    "timed_out": 0,
                }
            ]
        return out

    def attempts(self) -> list[dict]:
        return [a for wf in self.wf_ids for a in audit.read_attempt_log(self.attempt_log, wf)]

    def records(self) -> dict:
        return {"histories": self.histories(), "attempts": self.attempts()}

    def audit(self) -> dict:
        answers = audit.audit_temporal(self.histories(), self.attempts())
        return {**answers, "source": "DBOS step checkpoints + attempt log"}

    def cleanup(self) -> None:
        for wf in self.wf_ids:
            try:
                self.client.cancel_workflow(wf)
            except Exception:  # noqa: BLE001 - already ended
                pass
        self.stop_all()


def _decoded(row: dict):
    """A checkpoint row's output as DBOS reads it back (its serializer is named in the row)."""
    from dbos._serialization import DBOSDefaultSerializer, deserialize_value

    return deserialize_value(row["output"], row.get("serialization"), DBOSDefaultSerializer)


def dbos_steps_summary(rows: list[dict]) -> dict:
    """Summarise one workflow's ``dbos.operation_outputs`` rows (in function_id order) in the shape
    the Temporal auditor reads.

    - refund_completed / refund_failed: the refund step's row has an output / an error. DBOS
      checkpoints a step once it returns, so an attempt that died mid-step leaves no row:
      ``refund_attempt`` is 1 when the step completed or failed, else 0.
    - decide_completed: decide rows without an error.
    - signals: ``DBOS.recv`` rows that returned a message (a consumed approval). A recv that timed
      out records its ``None`` result serialized, so the output is decoded, not tested for NULL.
    - timer_started / timer_fired: a ``DBOS.sleep`` row records its deadline (epoch seconds) when it
      starts; it fired when the workflow's next row started at or after that deadline (a recv's
      timeout is recorded as a sleep too, and does not fire when the message came first).
    """

    def named(r, suffix):
        return (r["function_name"] or "").endswith(suffix)

    refund = [r for r in rows if named(r, "refund")]
    started, fired = [], []
    for k, r in enumerate(rows):
        if r["function_name"] != "DBOS.sleep":
            continue
        try:
            deadline = float(r["output"])
        except (TypeError, ValueError):
            continue
        t = (r["started_at_epoch_ms"] or 0) / 1000
        started.append({"t": t, "seconds": round(deadline - t, 3)})
        after = [x["started_at_epoch_ms"] / 1000 for x in rows[k + 1 :] if x["started_at_epoch_ms"]]
        if after and after[0] >= deadline - 0.001:
            fired.append({"t": after[0]})
    return {
        "refund_completed": any(r["error"] is None for r in refund),
        "refund_failed": any(r["error"] is not None for r in refund),
        "refund_attempt": 1 if refund else 0,
        "timed_out": 0,
        "decide_completed": sum(1 for r in rows if named(r, "decide") and r["error"] is None),
        "signals": sum(1 for r in rows if r["function_name"] == "DBOS.recv" and _decoded(r) is not None),
        "timer_started": started,
        "timer_fired": fired,
        "events": len(rows),
    }
