"""The two Temporal baselines (docs/protocol.md §16.1), on the ``temporalio`` SDK.

- temporal (a): Temporal alone with its recommended idempotency key
  (``<workflow run id>-<activity id>``), no check.
- temporal_check (b): the same workflow with the check a competent engineer writes (key
  ``<workflow id>-refund``, lookup, grant, amount against the approval, eligibility).

Both activity bodies are quoted verbatim in the report; ``http_target`` and ``grants_db`` are the
module globals they name, configured from the worker's environment (one worker process per run):

- ``ILR_TARGET_URL``, ``ILR_TARGET_TIER``, ``ILR_TARGET_QUERYABLE`` (0/1), ``ILR_SEND_TIMEOUT``:
  the local payment target (or the fault proxy in front of it);
- ``ILR_PROVE_DSN``: libpq conninfo of the database holding ``ilr.grants`` (plain SELECT);
- ``ILR_MODEL_BASE_URL``: the model stub (EMULATED model variance, the real ``anthropic`` SDK);
- ``ILR_ATTEMPT_LOG``: the worker's attempt log (JSON lines), which the auditor reads;
- ``ILR_KILL_AT`` / ``ILR_STOP_AT``: the kill points of docs/protocol.md §12 (ilr.killpoints,
  the same module the runtime uses). For an activity, effect_before_dispatch is hit right before
  the HTTP send and effect_after_send after the response, before returning; decide_after_response
  after the model's answer, before the decide activity returns.

The worker is a real subprocess: ``python -m prove.peers.temporal_baselines worker --address HOST:PORT
--task-queue Q --mode a|b [--id NAME]``. It never imports Django (it starts in well under a
second and a SIGKILL of it is a SIGKILL of the activity).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from prove.queries import BASELINE_GRANT

with workflow.unsafe.imports_passed_through():
    from demo.peers.targets_client import http_json
    from ilr import _killpoints as killpoints

WORKFLOW_NAME = "RefundWorkflow"
DECIDE_TIMEOUT = 10.0  # seconds; the stub answers in milliseconds


def now():
    """Wall-clock now as a timezone-aware datetime (what the (b) check compares expiry with)."""
    import datetime

    return datetime.datetime.now(datetime.UTC)


# -- the worker's attempt log (read by prove.harness.audit) ----------------------------------------------


class AttemptLog:
    """JSON lines, flushed and fsynced per line, so a line written before a SIGKILL survives."""

    def __init__(self, path: str | None):
        self.path = path
        self._lock = threading.Lock()

    def write(self, **entry) -> None:
        if not self.path:
            return
        try:
            info = activity.info()
            entry = {
                "workflow_id": info.workflow_id,
                "run_id": info.workflow_run_id,
                "activity_id": info.activity_id,
                "activity": info.activity_type,
                "attempt": info.attempt,
                **entry,
            }
        except RuntimeError:
            pass
        entry = {"t_wall": time.time(), "t_mono": time.monotonic(), "pid": os.getpid(), **entry}
        line = json.dumps(entry, default=str) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


attempt_log = AttemptLog(os.environ.get("ILR_ATTEMPT_LOG"))


# -- the two names the activity bodies use -------------------------------------------------------


class HttpTarget:
    """The local payment target as the activities see it (demo.peers.target's HTTP API).

    Every send hits the same kill points as the runtime's effect: effect_before_dispatch right
    before the bytes leave, effect_after_send after the response arrived.
    """

    def __init__(self, url: str | None, tier: int, queryable: bool, send_timeout: float):
        self.url = (url or "").rstrip("/")
        self.tier = tier
        self.tier_has_lookup = tier == 2 or (tier == 1 and queryable)
        self.send_timeout = send_timeout

    @classmethod
    def from_env(cls) -> HttpTarget:
        return cls(
            os.environ.get("ILR_TARGET_URL"),
            int(os.environ.get("ILR_TARGET_TIER", "1")),
            os.environ.get("ILR_TARGET_QUERYABLE", "1") not in ("0", "false", "no"),
            float(os.environ.get("ILR_SEND_TIMEOUT", "3")),
        )

    def post_refund(self, payment, amount, idempotency_key):
        """POST /refunds with the Idempotency-Key header; returns the refund JSON.

        Raises ApplicationError (non-retryable) for a definite no (4xx other than 409/429);
        any other failure (timeout, reset, 5xx) raises and Temporal retries the activity.
        """
        body = {"payment": payment, "amount": amount, "effect_id": idempotency_key}
        attempt_log.write(event="send", key=idempotency_key, payment=payment, amount=amount)
        killpoints.hit("effect_before_dispatch")
        try:
            status, answer = http_json(
                "POST",
                f"{self.url}/refunds",
                body,
                headers={"Idempotency-Key": idempotency_key},
                timeout=self.send_timeout,
            )
        except Exception as exc:
            attempt_log.write(event="send_error", key=idempotency_key, error=f"{type(exc).__name__}: {exc}")
            raise
        attempt_log.write(event="response", key=idempotency_key, status=status, answer=answer)
        killpoints.hit("effect_after_send")
        if status == 200:
            return answer
        if 400 <= status < 500 and status not in (409, 429):
            raise ApplicationError(f"target refused: HTTP {status}: {answer}", non_retryable=True)
        raise RuntimeError(f"target answered HTTP {status}: {answer}")

    def find_refund(self, key):
        status, answer = http_json("GET", f"{self.url}/refunds?key={key}", timeout=10.0)
        attempt_log.write(event="lookup", key=key, status=status, found=status == 200)
        if status == 200:
            return answer
        if status == 404:
            return None
        raise RuntimeError(f"lookup answered HTTP {status}: {answer}")

    def get_payment(self, payment):
        status, answer = http_json("GET", f"{self.url}/payments/{payment}", timeout=10.0)
        if status != 200:
            raise RuntimeError(f"GET /payments answered HTTP {status}: {answer}")
        return answer


class GrantsDB:
    """A plain SELECT from the same ilr.grants table the runtime locks (no lock held)."""

    def __init__(self, dsn: str | None):
        self.dsn = dsn

    def fetch(self, grant_id):
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row) as conn:
            row = conn.execute(BASELINE_GRANT, (grant_id,)).fetchone()
        attempt_log.write(
            event="grant_check", grant_id=grant_id, revoked=bool(row and row["revoked_at"]), found=row is not None
        )
        if row is None:
            raise ApplicationError(f"no grant {grant_id}", non_retryable=True)
        return row


http_target = HttpTarget.from_env()
grants_db = GrantsDB(os.environ.get("ILR_PROVE_DSN"))


# -- the activities (docs/protocol.md §16.1), quoted verbatim in the report ---------------------


@activity.defn(name="refund")
def refund_idem(req):
    info = activity.info()
    key = f"{info.workflow_run_id}-{info.activity_id}"  # Temporal's recommended key
    return http_target.post_refund(req["payment"], req["amount"], idempotency_key=key)


@activity.defn(name="refund")
def refund_check(req):
    info = activity.info()
    key = f"{info.workflow_id}-refund"  # stable across retry and reset
    if http_target.tier_has_lookup:
        existing = http_target.find_refund(key)  # "did my operation already happen?"
        if existing:
            return existing
    g = grants_db.fetch(req["grant_id"])  # plain SELECT from the same ilr.grants table
    if g["revoked_at"] or (g["expires_at"] and g["expires_at"] <= now()) or req["amount"] > g["max_cents"]:
        raise ApplicationError("not authorized", non_retryable=True)
    if req["amount"] != req["approved_amount"]:
        raise ApplicationError("amount differs from approval", non_retryable=True)
    p = http_target.get_payment(req["payment"])
    if p["refunded_total"] + req["amount"] > p["paid"]:
        raise ApplicationError("not eligible", non_retryable=True)
    return http_target.post_refund(req["payment"], req["amount"], idempotency_key=key)


ACTIVITIES = {"a": refund_idem, "b": refund_check}


@activity.defn(name="decide")
def decide(case):
    """The refund decision through the real ``anthropic`` SDK (the model stub: EMULATED)."""
    import anthropic

    from demo.peers import model

    where = model.endpoint()
    request = model.build_request(
        {k: case[k] for k in ("id", "payment", "reason", "paid") if k in case} | {"case_id": case["id"]}
    )
    attempt_log.write(event="decide_call")
    with anthropic.Anthropic(
        base_url=where["base_url"], api_key=where["api_key"], max_retries=0, timeout=60.0
    ) as client:
        response = client.messages.create(**request)
    text = "".join(b.text for b in response.content if getattr(b, "type", None) == "text")
    decision = model.parse_decision(text)
    attempt_log.write(event="decide_response", amount=decision["amount"])
    killpoints.hit("decide_after_response")
    return {
        "amount": decision["amount"],
        "reasoning": decision["reasoning"],
        "model": response.model,
        "emulated": where["emulated"],
    }


# -- the workflow -----------------------------------------------------------------------------------


@workflow.defn(name=WORKFLOW_NAME)
class RefundWorkflow:
    """Decide (an activity), wait for the approve signal, send the refund activity, sleep.

    Input: {"id", "payment", "paid", "reason", "send_timeout", "sleep_before_effect" (S10),
    "approval_timeout"}. The approve signal carries {"grant_id", "approved_amount"}.
    Activity options: start_to_close_timeout = send_timeout + 2 s (the attempt's socket timeout
    is send_timeout), Temporal's default retry policy (1 s, x2, cap 100 s, unlimited).
    """

    def __init__(self) -> None:
        self._approval: dict | None = None
        self._proposal: dict | None = None
        self._phase = "deciding"

    @workflow.signal
    def approve(self, approval: dict) -> None:
        if self._approval is None:
            self._approval = approval

    @workflow.query
    def proposal(self) -> dict | None:
        return self._proposal

    @workflow.query
    def phase(self) -> str:
        return self._phase

    @workflow.run
    async def run(self, case: dict) -> dict:
        decision = await workflow.execute_activity(
            "decide", case, start_to_close_timeout=timedelta(seconds=DECIDE_TIMEOUT)
        )
        self._proposal = {"payment": case["payment"], "amount": decision["amount"]}
        self._phase = "waiting_approval"
        try:
            await workflow.wait_condition(
                lambda: self._approval is not None, timeout=case.get("approval_timeout", 24 * 3600)
            )
        except TimeoutError:
            return {"status": "approval expired"}
        if case.get("sleep_before_effect"):
            self._phase = "sleeping"
            await workflow.sleep(case["sleep_before_effect"])
        self._phase = "refunding"
        req = {
            "payment": case["payment"],
            "amount": self._proposal["amount"],
            "grant_id": self._approval["grant_id"],
            "approved_amount": self._approval["approved_amount"],
        }
        try:
            result = await workflow.execute_activity(
                "refund",
                req,
                start_to_close_timeout=timedelta(seconds=case.get("send_timeout", 3.0) + 2),
                retry_policy=RetryPolicy(),
            )
        except Exception as exc:  # an ActivityError: the non-retryable refusal of (b), or a definite no
            self._phase = "done"
            cause = getattr(exc, "cause", None)
            return {"status": "REFUSED", "error": str(cause or exc), "amount": req["amount"]}
        self._phase = "done"
        return {"status": "COMPLETED", "refund": result, "amount": req["amount"]}


# -- worker entry point ---------------------------------------------------------------------------


async def _run_worker(address: str, task_queue: str, mode: str, worker_id: str) -> None:
    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(address, identity=worker_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with ThreadPoolExecutor(max_workers=4) as pool:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[RefundWorkflow],
            activities=[decide, ACTIVITIES[mode]],
            activity_executor=pool,
            identity=worker_id,
            graceful_shutdown_timeout=timedelta(seconds=2),
        )
        async with worker:
            print(f"ready {worker_id}", flush=True)
            await stop.wait()


async def _run_versioned_worker(address: str, task_queue: str, module: str, workflow_cls: str, worker_id: str) -> None:
    """S14: a worker for a generated workflow module (prove.harness.s14) on one version's task queue."""
    import importlib

    from temporalio.client import Client
    from temporalio.worker import Worker

    mod = importlib.import_module(module)
    client = await Client.connect(address, identity=worker_id)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    with ThreadPoolExecutor(max_workers=4) as pool:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[getattr(mod, workflow_cls)],
            activities=[mod.mark],
            activity_executor=pool,
            identity=worker_id,
            graceful_shutdown_timeout=timedelta(seconds=2),
        )
        async with worker:
            print(f"ready {worker_id}", flush=True)
            await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m prove.peers.temporal_baselines")
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="run a worker for one task queue")
    w.add_argument("--address", required=True)
    w.add_argument("--task-queue", required=True)
    w.add_argument("--mode", choices=sorted(ACTIVITIES), required=True)
    w.add_argument("--id", default=f"tw-{os.getpid()}")
    v = sub.add_parser("versioned-worker", help="S14: a worker for a generated workflow module")
    v.add_argument("--address", required=True)
    v.add_argument("--task-queue", required=True)
    v.add_argument("--module", required=True)
    v.add_argument("--workflow", required=True)
    v.add_argument("--id", default=f"tv-{os.getpid()}")
    args = parser.parse_args(argv)
    from prove.harness.worker_shim import install

    install()  # kill-point SIGSTOPs land at the point (see prove.harness.worker_shim)
    if args.cmd == "versioned-worker":
        asyncio.run(_run_versioned_worker(args.address, args.task_queue, args.module, args.workflow, args.id))
    else:
        asyncio.run(_run_worker(args.address, args.task_queue, args.mode, args.id))


if __name__ == "__main__":
    sys.exit(main())
