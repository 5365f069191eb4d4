"""Pydantic AI agents made durable by Interlock (ilr.contrib.pydantic_ai) on real PostgreSQL, real
``ilr_worker`` subprocesses, the real HTTP payment target and the real Pydantic AI (2.x) with its
offline ``FunctionModel`` running a script (EMULATED model). Workflow: demo.agent_pydantic_ai.pyd_refund.

What is shown: each model request is recorded once and never asked again on replay (the
transcript a recovering worker rebuilds hashes to the fingerprints recorded per request); the
refund tool's approval is an approval request bound to the exact arguments' hash; a SIGKILL at a
representative subset of the kill matrix per tier leaves 0 duplicates and 0 unapproved sends
(the full matrix: ``manage.py agents_report --framework pydantic-ai``); an edited-argument
approval is refused as another payload; a revoke during the loop and a changed premise are
refused in words the model reads back.
"""

from __future__ import annotations

import signal

import pytest

from demo.peers.targets_client import http_json
from ilr import _codec as codec
from ilr._agents import AMBIGUOUS_TEXT
from tests.support.agents import TERMINAL, pending_request
from tests.support.refund_harness import refund_env
from tests.support.waits import wait_for

pytest.importorskip("pydantic_ai")


def start(rt, env, wf_id: str, **input) -> dict:
    case = env.case(wf_id)
    full = {
        "url": env.target_url,
        "tier": env.tier,
        "queryable": env.queryable,
        "case_id": wf_id,
        "payment": case["payment"],
        **input,
    }
    rt.start("pyd_refund", wf_id, full)
    return full


def refund_posts(env, payment: str) -> list[dict]:
    return [
        e
        for e in env.access_log()
        if e["method"] == "POST"
        and e["path"] == "/refunds"
        and isinstance(e["body"], dict)
        and e["body"].get("payment") == payment
    ]


def rows(rt, wf_id: str, kind: str | None = None) -> list[dict]:
    out = (
        rt.connection()
        .execute(
            "select seq, kind, name, fingerprint, output, epoch from ilr.steps where workflow_id = %s order by seq",
            (wf_id,),
        )
        .fetchall()
    )
    return [r for r in out if kind is None or r["kind"] == kind]


def llm_calls(rt, wf_id: str) -> int:
    return (
        rt.connection()
        .execute("select count(*) as n from ilr.llm_calls where workflow_id = %s", (wf_id,))
        .fetchone()["n"]
    )


def check_transcript_replays(rt, wf_id: str, input: dict, result: dict) -> None:
    """Each model request of the returned transcript, rebuilt from it, hashes to the fingerprint
    recorded for that request (by whichever worker asked it), and each response is the recorded one."""
    from ilr.contrib.pydantic_ai.replay import request_fingerprints

    decided = rows(rt, wf_id, "decide")
    assert request_fingerprints("support", None, result["transcript"]) == [r["fingerprint"] for r in decided]
    responses = [m for m in result["transcript"] if m["kind"] == "response"]
    assert [m["parts"] for m in responses] == [r["output"]["response"]["parts"] for r in decided]


def test_lookup_then_approved_refund_commits_once_and_the_model_answers(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "pa-ok")
        req = pending_request(rt, "pa-ok")
        assert req["payload"] == {"payment": input["payment"], "amount": 2000}
        assert req["payload_hash"] == codec.payload_hash(req["payload"])
        assert req["effect_key"] == "agent:pa-ok:support:1.0"
        assert req["premises"] == {"payment": input["payment"], "eligible": True, "refunded_by_others": 0}
        assert refund_posts(env, input["payment"]) == []
        rt.approve_request(req["id"], by="alice")
        result = rt.result("pa-ok", timeout=40)
        assert result["turns"] == 3
        [refund] = result["outcomes"]
        assert refund["status"] == "COMMITTED" and refund["input"] == req["payload"]
        assert result["output"].startswith("Final answer: ") and '"COMMITTED"' in result["output"]
        assert [(r["payment"], r["amount"]) for r in env.ledger(input["payment"])] == [(input["payment"], 2000)]
        assert len(refund_posts(env, input["payment"])) == 1
        assert llm_calls(rt, "pa-ok") == 3 == len(rows(rt, "pa-ok", "decide"))
        check_transcript_replays(rt, "pa-ok", input, result)
