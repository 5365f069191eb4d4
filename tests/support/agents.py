"""Helpers of the durable agent tests (tests/faults/test_agents*.py, test_openai_agents.py): start the
agent_refund workflow of tests.support.flows for a case of a refund_env, wait for its approval request,
read what the target and the tables saw, and drive a run through a SIGKILL at a kill point."""

from __future__ import annotations

import signal
from collections.abc import Callable

from demo.peers.targets_client import http_json
from tests.support.queries.steps import COUNT_LLM_CALLS_BY_WORKFLOW_ID, SEQ_KIND_NAME_ETC_OF_STEPS_BY_WORKFLOW_ID
from tests.support.waits import wait_for

TERMINAL = ("completed", "failed", "stuck", "cancelled")


def start(rt, env, wf_id: str, *, script: str = "refund", **input) -> dict:
    """Create the case's payment, script the stub for it, start agent_refund; the input."""
    case = env.case(wf_id)
    status, _ = http_json("POST", f"{env.model_url}/admin/script", {"agent": script})
    assert status == 200
    full = {
        "url": env.target_url,
        "tier": env.tier,
        "queryable": env.queryable,
        "case_id": wf_id,
        "payment": case["payment"],
        **input,
    }
    rt.start("agent_refund", wf_id, full)
    return full


def pending_request(rt, wf_id: str, timeout: float = 40) -> dict:
    """The approval request the workflow waits on (fails early if the workflow ended)."""

    def found():
        d = rt.describe(wf_id)
        assert d["status"] not in TERMINAL, (d["status"], d["error"], d["result"])
        rows = [r for r in rt.approval_requests() if r["workflow_id"] == wf_id]
        return rows[0] if rows and d["status"] == "sleeping" else None

    return wait_for(found, timeout=timeout, message=f"{wf_id} waiting on an approval request")


def refund_posts(env, payment: str) -> list[dict]:
    """Every POST /refunds that reached the target for ``payment`` (the access log)."""
    return [
        e
        for e in env.access_log()
        if e["method"] == "POST"
        and e["path"] == "/refunds"
        and isinstance(e["body"], dict)
        and e["body"].get("payment") == payment
    ]


def steps(rt, wf_id: str) -> list[dict]:
    """The workflow's recorded steps in order: seq, kind, name, fingerprint, output, epoch."""
    return rt.connection().execute(SEQ_KIND_NAME_ETC_OF_STEPS_BY_WORKFLOW_ID, (wf_id,)).fetchall()


def llm_calls(rt, wf_id: str) -> int:
    """How many model calls the workflow made (ilr.llm_calls), recorded or discarded by a kill."""
    return rt.connection().execute(COUNT_LLM_CALLS_BY_WORKFLOW_ID, (wf_id,)).fetchone()["n"]


def drive_with_kill(
    rt, workers, env, wf_id: str, point: str, start: Callable[[], dict], *, args: tuple = ()
) -> tuple[dict, dict, list[dict], dict]:
    """Run ``wf_id`` through a SIGKILL at kill point ``point``: worker w1 (armed with ILR_KILL_AT=point,
    extra worker ``args``) runs it from ``start()`` (which starts the workflow and returns its input);
    the first approval request is approved as soon as it is pending, by whichever worker; once w1 died
    of SIGKILL, w2 recovers the run to its end.

    Returns:
        (input, result, steps recorded when w1 died, the approved request).

    Fails when the workflow ends before w1 is killed, when w1 exits otherwise, or on a timeout.
    """
    w1 = workers.start("w1", env=env.worker_env(ILR_KILL_AT=point), args=args)
    full = start()
    approved: list[dict] = []

    def approve_pending() -> None:
        if not approved:
            rows = [r for r in rt.approval_requests() if r["workflow_id"] == wf_id]
            if rows:
                approved.append(rt.approve_request(rows[0]["id"], by="alice"))

    def killed():
        approve_pending()
        d = rt.describe(wf_id)
        assert d["status"] not in TERMINAL, (point, d["status"], d["error"], d["result"])
        return w1.poll() is not None

    wait_for(killed, timeout=60, message=f"w1 killed at {point}")
    assert w1.returncode == -signal.SIGKILL, workers.log("w1")
    at_kill = steps(rt, wf_id)
    workers.start("w2", env=env.worker_env(), args=args)
    wait_for(
        lambda: (approve_pending(), rt.describe(wf_id)["status"] in TERMINAL)[1],
        timeout=90,
        message=f"{wf_id} ended after the kill at {point}",
    )
    return full, rt.result(wf_id, timeout=5), at_kill, approved[0]
