"""Helpers of the durable agent tests (tests/faults/test_agents*.py): start the agent_refund
workflow of tests.support.flows for a case of a refund_env, and wait for its approval request."""

from __future__ import annotations

from demo.peers.targets_client import http_json
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
