"""Baseline (c): the refund case on DBOS Transact (docs/protocol.md §16.1), in a DBOS process of
its own on a system database of its own in the same PostgreSQL cluster.

The workflow decides (a step: the model stub through the real ``anthropic`` SDK), publishes its
proposal as an event, waits for the approval message with ``DBOS.recv`` and a timeout, may sleep
(S10), then sends the refund as a ``@DBOS.step`` keyed by the workflow id (DBOS's recommended
idempotency key) with the same pre-send check as Temporal's (b): lookup where the tier has one,
grant, amount against the approval, eligibility. The step retries on transient failures
(1 s, x2, as Temporal's default policy starts) and not on a refusal.

Configured from the environment, like prove.temporal_baselines: ``ILR_TARGET_URL``,
``ILR_TARGET_TIER``, ``ILR_TARGET_QUERYABLE``, ``ILR_SEND_TIMEOUT``, ``ILR_PROVE_DSN`` (the
database holding ``ilr.grants``), ``ILR_MODEL_BASE_URL``, ``ILR_ATTEMPT_LOG`` and the kill points
``ILR_KILL_AT`` / ``ILR_STOP_AT`` (ilr.killpoints: effect_before_dispatch right before the HTTP
send, effect_after_send after the response, decide_after_response after the model's answer).

The process is a real subprocess that never imports Django:
``python -m prove.peers.dbos_baseline worker --url SQLALCHEMY_URL --id EXECUTOR``. It listens on
the queue ``refunds``; the harness enqueues with ``DBOSClient`` and approves with
``DBOSClient.send``. DBOS recovers a process's PENDING workflows when a process with the same
executor id launches again (its recovery model): a restart after SIGKILL is that.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time

from dbos import DBOS, DBOSConfig

from demo.peers.targets_client import http_json
from ilr import _killpoints as killpoints
from prove.queries import BASELINE_GRANT

WORKFLOW_NAME = "refund_workflow"
QUEUE_NAME = "refunds"
APPROVE_TOPIC = "approve"
PROPOSAL_EVENT = "proposal"
PHASE_EVENT = "phase"


class Refused(Exception):
    """A definite no (the check refused, or the target answered 4xx): not retried."""


def now():
    """Wall-clock now as a timezone-aware datetime (what the check compares expiry with)."""
    return datetime.datetime.now(datetime.UTC)


class AttemptLog:
    """JSON lines, flushed and fsynced per line, so a line written before a SIGKILL survives."""

    def __init__(self, path: str | None):
        self.path = path
        self._lock = threading.Lock()

    def write(self, **entry) -> None:
        if not self.path:
            return
        entry = {
            "t_wall": time.time(),
            "t_mono": time.monotonic(),
            "pid": os.getpid(),
            "workflow_id": DBOS.workflow_id,
            "step_id": DBOS.step_id,
            **entry,
        }
        line = json.dumps(entry, default=str) + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())


attempt_log = AttemptLog(os.environ.get("ILR_ATTEMPT_LOG"))


class HttpTarget:
    """The local payment target as the step sees it (prove.target's HTTP API), with the same kill
    points as the runtime's effect."""

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
        """POST /refunds with the Idempotency-Key header; returns the refund JSON. Raises Refused
        for a definite no (4xx other than 409/429), anything else for a transient failure."""
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
            raise Refused(f"target refused: HTTP {status}: {answer}")
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
            raise Refused(f"no grant {grant_id}")
        return row


http_target = HttpTarget.from_env()
grants_db = GrantsDB(os.environ.get("ILR_PROVE_DSN"))


def _transient(exc: BaseException) -> bool:
    return not isinstance(exc, Refused)


# -- the step and the workflow, quoted verbatim in the report -----------------------------------


@DBOS.step(retries_allowed=True, interval_seconds=1.0, backoff_rate=2.0, max_attempts=10, should_retry=_transient)
def refund(req):
    key = f"{DBOS.workflow_id}-refund"  # the workflow id: stable across recovery
    if http_target.tier_has_lookup:
        existing = http_target.find_refund(key)  # "did my operation already happen?"
        if existing:
            return existing
    g = grants_db.fetch(req["grant_id"])  # plain SELECT from the same ilr.grants table
    if g["revoked_at"] or (g["expires_at"] and g["expires_at"] <= now()) or req["amount"] > g["max_cents"]:
        raise Refused("not authorized")
    if req["amount"] != req["approved_amount"]:
        raise Refused("amount differs from approval")
    p = http_target.get_payment(req["payment"])
    if p["refunded_total"] + req["amount"] > p["paid"]:
        raise Refused("not eligible")
    return http_target.post_refund(req["payment"], req["amount"], idempotency_key=key)


@DBOS.workflow(name=WORKFLOW_NAME)
def refund_workflow(case):
    decision = decide(case)
    DBOS.set_event(PROPOSAL_EVENT, {"payment": case["payment"], "amount": decision["amount"]})
    DBOS.set_event(PHASE_EVENT, "waiting_approval")
    approval = DBOS.recv(APPROVE_TOPIC, timeout_seconds=case.get("approval_timeout", 24 * 3600))
    if approval is None:
        return {"status": "approval expired"}
    if case.get("sleep_before_effect"):
        DBOS.set_event(PHASE_EVENT, "sleeping")
        DBOS.sleep(case["sleep_before_effect"])
    DBOS.set_event(PHASE_EVENT, "refunding")
    req = {
        "payment": case["payment"],
        "amount": decision["amount"],
        "grant_id": approval["grant_id"],
        "approved_amount": approval["approved_amount"],
    }
    try:
        result = refund(req)
    except Exception as exc:  # a refusal, or retries exhausted
        DBOS.set_event(PHASE_EVENT, "done")
        return {"status": "REFUSED", "error": str(exc), "amount": req["amount"]}
    DBOS.set_event(PHASE_EVENT, "done")
    return {"status": "COMPLETED", "refund": result, "amount": req["amount"]}


@DBOS.step()
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


# -- process entry point ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m prove.peers.dbos_baseline")
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="launch DBOS and run the refund queue until SIGTERM")
    w.add_argument("--url", required=True, help="SQLAlchemy URL of DBOS's system database")
    w.add_argument("--id", default="dbos-worker", help="executor id: a restart with the same id recovers")
    m = sub.add_parser("migrate", help="launch once (DBOS creates its tables), then exit")
    m.add_argument("--url", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "migrate":
        DBOS(
            config={
                "name": "ilr-prove",
                "system_database_url": args.url,
                "executor_id": "migrate",
                "application_version": "prove-1",
                "run_admin_server": False,
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        DBOS.destroy()
        return
    from prove.harness.worker_shim import install

    install()  # kill-point SIGSTOPs land at the point (see prove.harness.worker_shim)
    config: DBOSConfig = {
        "name": "ilr-prove",
        "system_database_url": args.url,
        "executor_id": args.id,
        "application_version": "prove-1",
        "run_admin_server": False,
        "log_level": "WARNING",
    }
    DBOS(config=config)
    DBOS.launch()
    # Registered after launch (DBOS persists a queue's configuration); 0.1 s polling, so a
    # scenario's timings are not the default 1 s poll's.
    DBOS.register_queue(QUEUE_NAME, worker_concurrency=4, polling_interval_sec=0.1)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    print(f"ready {args.id}", flush=True)
    stop.wait()
    DBOS.destroy(workflow_completion_timeout_sec=2)


if __name__ == "__main__":
    sys.exit(main())
