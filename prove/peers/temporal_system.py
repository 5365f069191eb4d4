"""The Temporal baselines as a system under test (docs/protocol.md §16.1), behind the driver
interface of prove/peers/systems.py: ``TemporalSystem(mode="a"|"b")`` runs
prove.peers.temporal_baselines on the Temporal dev server, ``python -m
prove.peers.temporal_baselines worker`` subprocesses, one task queue per run."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

from prove.harness import audit
from prove.peers.systems import APPROVER, SEND_TIMEOUT, System


class TemporalSystem(System):
    """A Temporal baseline: mode "a" (recommended key) or "b" (the careful check)."""

    def __init__(self, run, mode: str):
        super().__init__(run)
        self.mode = mode
        self.name = "temporal" if mode == "a" else "temporal_check"
        self.infra = run.infra
        self.server = run.infra.temporal
        self.task_queue = f"tq-{run.run_id}"
        self.wf_id = run.case_id
        self.run_ids: list[str] = []
        self.grant_id = None
        self.proposal = None
        self.attempt_log = run.workdir / "attempts.jsonl"
        self.handle = None

    def point(self, name: str) -> str:
        # "T_dispatch committed; no bytes sent" has no Temporal counterpart other than "before
        # the HTTP send" (docs/protocol.md §16.1: effect_before_dispatch means before the send).
        base, at, n = name.partition("@")
        return {"effect_after_dispatch": "effect_before_dispatch"}.get(base, base) + at + n

    def start_worker(
        self, kill_at=None, stop_at=None, address: str | None = None, wid: str | None = None, wait_ready: bool = True
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
            "prove.peers.temporal_baselines",
            "worker",
            "--address",
            address or self.server.address,
            "--task-queue",
            self.task_queue,
            "--mode",
            self.mode,
            "--id",
            f"{self.run.run_id}-{wid}",
        ]
        self._spawn(wid, cmd, env)
        if wait_ready:
            self._wait_ready(wid)
        return wid

    def _wait_ready(self, wid: str, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[wid].poll() is not None:
                raise RuntimeError(
                    f"temporal worker {wid} exited {self.procs[wid].returncode}: "
                    f"{self.logs[wid].read_text(errors='replace')[-2000:]}"
                )
            if b"ready" in self.logs[wid].read_bytes():
                return
            time.sleep(0.05)
        raise TimeoutError(f"temporal worker {wid} not ready in {timeout} s")

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

    @property
    def client(self):
        return self.infra.temporal_client()

    def start(self, case: dict) -> None:
        async def go():
            return await self.client.start_workflow("RefundWorkflow", case, id=self.wf_id, task_queue=self.task_queue)

        self.handle = self.infra.bridge.call(go())
        self.run_ids.append(self.handle.result_run_id or self.handle.run_id)
        self.run.fault("start", workflow="RefundWorkflow")

    def _handle(self):
        return self.client.get_workflow_handle(self.wf_id)

    def wait_proposal(self, timeout: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout

        async def q():
            h = self._handle()
            return await h.query("proposal"), await h.query("phase")

        while time.monotonic() < deadline:
            try:
                proposal, phase = self.infra.bridge.call(q(), timeout=15)
            except Exception:  # noqa: BLE001 - no worker yet to answer the query
                proposal, phase = None, None
            if proposal and phase == "waiting_approval":
                self.proposal = proposal
                return proposal
            time.sleep(0.1)
        raise TimeoutError(f"{self.wf_id} did not ask for approval within {timeout} s")

    def phase(self) -> str | None:
        async def q():
            return await self._handle().query("phase")

        try:
            return self.infra.bridge.call(q(), timeout=10)
        except Exception:  # noqa: BLE001
            return None

    def approve(self, payload: dict | None = None) -> str:
        payload = payload or self.proposal
        self.grant_id = self.infra.rt.grant(self.wf_id, "refund", max_cents=payload["amount"], by=APPROVER)
        self._signal({"grant_id": self.grant_id, "approved_amount": payload["amount"]})
        self.run.approved_amount = payload["amount"]
        self.run.approved_amounts.append(payload["amount"])
        self.run.approved_at = time.time()
        self.run.fault("approve", grant=self.grant_id, amount=payload["amount"])
        return self.grant_id

    def signal_approval_raw(self, amount: int) -> None:
        self.grant_id = self.infra.rt.grant(self.wf_id, "refund", max_cents=amount, by=APPROVER)
        self._signal({"grant_id": self.grant_id, "approved_amount": amount})
        self.run.approved_amount = amount
        self.run.approved_amounts.append(amount)
        self.run.approved_at = time.time()
        self.run.fault("approve_signal", grant=self.grant_id)

    def _signal(self, payload: dict) -> None:
        async def go():
            await self._handle().signal("approve", payload)

        self.infra.bridge.call(go())

    def revoke(self) -> list[str]:
        # For (a) and (b): the same revoked_at update on ilr.grants (scenario S03).
        returned = self.infra.rt.revoke(self.grant_id, by="bob")
        self.run.fault("revoke", grant=self.grant_id, returned=returned)
        return []

    def result(self, timeout: float = 90.0, **_) -> dict:
        async def go():
            return await self._handle().result(follow_runs=True)

        try:
            r = self.infra.bridge.call(asyncio.wait_for(go(), timeout), timeout=timeout + 5)
            return {"status": r.get("status"), "result": r}
        except TimeoutError as exc:
            return {"status": "timeout", "error": repr(exc)}
        except Exception as exc:  # noqa: BLE001 - WorkflowFailureError and friends
            return {"status": "workflow failed", "error": repr(exc)}

    def reset_to_decide(self) -> str:
        """Temporal's reset to before the decision activity (the first workflow task)."""
        from temporalio.api.common.v1 import WorkflowExecution
        from temporalio.api.enums.v1 import EventType
        from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

        async def go():
            h = self._handle()
            history = await h.fetch_history()
            first_wft = next(
                e.event_id for e in history.events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
            )
            resp = await self.client.workflow_service.reset_workflow_execution(
                ResetWorkflowExecutionRequest(
                    namespace=self.client.namespace,
                    workflow_execution=WorkflowExecution(workflow_id=self.wf_id, run_id=history.run_id),
                    reason="prove S05: re-decide",
                    workflow_task_finish_event_id=first_wft,
                    request_id=str(uuid.uuid4()),
                )
            )
            return resp.run_id, first_wft

        run_id, event = self.infra.bridge.call(go())
        self.run_ids.append(run_id)
        self.run.fault("reset", to_event=event, new_run_id=run_id)
        return run_id

    def histories(self) -> list[dict]:
        async def go():
            out = []
            for rid in dict.fromkeys(self.run_ids):
                h = self.client.get_workflow_handle(self.wf_id, run_id=rid)
                hist = await h.fetch_history()
                out.append({"run_id": rid, **audit.temporal_history_summary(hist.events)})
            return out

        try:
            return self.infra.bridge.call(go(), timeout=30)
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

    def attempts(self) -> list[dict]:
        return audit.read_attempt_log(self.attempt_log, self.wf_id)

    def records(self) -> dict:
        return {"histories": self.histories(), "attempts": self.attempts()}

    def audit(self) -> dict:
        return audit.audit_temporal(self.histories(), self.attempts())

    def cleanup(self) -> None:
        async def term():
            try:
                await self._handle().terminate("prove cleanup")
            except Exception:  # noqa: BLE001 - already closed
                pass

        try:
            self.infra.bridge.call(term(), timeout=10)
        except Exception:  # noqa: BLE001
            pass
        self.stop_all()
