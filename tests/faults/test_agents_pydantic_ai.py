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

import pytest

from ilr import _codec as codec
from ilr._agents import AMBIGUOUS_TEXT
from tests.support.agents import drive_with_kill, llm_calls, pending_request, refund_posts, steps
from tests.support.queries.effects import COUNT_EFFECTS
from tests.support.refund_harness import refund_env

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


def rows(rt, wf_id: str, kind: str | None = None) -> list[dict]:
    return [r for r in steps(rt, wf_id) if kind is None or r["kind"] == kind]


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


# -- SIGKILL: a representative subset of the kill matrix per tier (the full one: agents_report) ----


# (kill point, tier) -> (the refund's EffectResult status, applications at the target).
# decide_after_response@2: the request that proposes the refund; step_after_record@2: the lookup.
EXPECTED = {
    ("decide_after_response@2", 1): ("COMMITTED", 1),
    ("step_after_record@2", 1): ("COMMITTED", 1),
    ("effect_after_send", 1): ("COMMITTED_BY_RETRY", 1),
    ("effect_after_dispatch", 2): ("REAPPLIED_AFTER_QUERY", 1),
    ("effect_after_commit", 2): ("COMMITTED", 1),
    ("effect_after_send", 3): ("AMBIGUOUS", 1),
}


@pytest.mark.parametrize("point,tier", list(EXPECTED), ids=[f"{p}-tier{t}" for p, t in EXPECTED])
def test_a_kill_applies_the_approved_refund_at_most_once_and_the_transcript_replays(rt, workers, tmp_path, point, tier):
    status, applications = EXPECTED[(point, tier)]
    wf_id = f"pa-k{tier}-{point.split('@')[0]}"
    with refund_env(tmp_path, tier=tier) as env:
        input, result, at_kill, approved = drive_with_kill(
            rt, workers, env, wf_id, point, lambda: start(rt, env, wf_id)
        )
        payment = input["payment"]
        [refund] = result["outcomes"]
        assert refund["status"] == status, result["outcomes"]
        ledger = env.ledger(payment)
        assert len(ledger) == applications and all(r["amount"] == 2000 for r in ledger), ledger
        # 0 unapproved sends: every POST that reached the target carries the approved payload.
        assert approved["payload"] == {"payment": payment, "amount": 2000}
        posts = refund_posts(env, payment)
        assert len(posts) >= applications and all(
            {k: p["body"][k] for k in ("payment", "amount")} == approved["payload"] for p in posts
        ), posts
        if status == "AMBIGUOUS":
            assert refund["content"].startswith(AMBIGUOUS_TEXT) and AMBIGUOUS_TEXT in result["output"]
        else:
            assert f'"{status}"' in result["output"]
        # A model call the kill discarded is counted, and only then.
        discarded = llm_calls(rt, wf_id) - len(rows(rt, wf_id, "decide"))
        assert discarded == (1 if point.startswith("decide_after_response") else 0)
        after = {s["seq"]: s for s in rows(rt, wf_id)}
        assert at_kill and all(after[s["seq"]] == s for s in at_kill)
        check_transcript_replays(rt, wf_id, input, result)


# -- what the approver and the world do while the loop waits -------------------------------------


def test_an_approver_who_edits_the_arguments_approves_another_payload_and_nothing_is_sent(rt, workers, tmp_path):
    """The approval is of {amount: 2000}; the approver's tool hands the run 1500 instead
    (ToolApproved(override_args=...)): the grant is bound to the hash of the approved arguments,
    so the send of the edited ones is refused, and the model reads why."""
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "pa-edit", edit_amount=1500)
        req = pending_request(rt, "pa-edit")
        assert req["payload"] == {"payment": input["payment"], "amount": 2000}
        rt.approve_request(req["id"], by="alice")
        result = rt.result("pa-edit", timeout=40)
        [refund] = result["outcomes"]
        assert refund["input"] == {"payment": input["payment"], "amount": 1500}
        assert refund["status"] == "REFUSED:lease"
        assert refund["content"] == (
            f'refused: the approval covers {{"amount": 2000, "payment": "{input["payment"]}"}}, not these '
            f'arguments {{"amount": 1500, "payment": "{input["payment"]}"}}: edited arguments are another '
            "payload and need their own approval; nothing was sent"
        )
        assert refund["content"] in result["output"]
        assert refund_posts(env, input["payment"]) == [] and env.ledger(input["payment"]) == []


def test_a_rejected_approval_is_a_denied_tool_call_the_model_reads(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "pa-no")
        req = pending_request(rt, "pa-no")
        rt.reject_request(req["id"], by="bob", reason="refunded by phone already")
        result = rt.result("pa-no", timeout=40)
        assert result["outcomes"][-1]["status"] == "not_approved:rejected"
        said = "not approved: refunded by phone already (rejected by bob); nothing was sent"
        assert result["output"] == f"Final answer: {said}"
        assert refund_posts(env, input["payment"]) == []
        assert rt.connection().execute(COUNT_EFFECTS).fetchone()["n"] == 0


def test_a_revoke_during_the_loop_stops_the_send(rt, workers, tmp_path):
    """Approved while no worker runs, then revoked: the next worker resumes the agent, the send
    is refused (REFUSED:lease), and the model is told."""
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "pa-revoke")
        req = pending_request(rt, "pa-revoke")
        workers.kill("w1")
        grant = rt.approve_request(req["id"], by="alice")["grant_id"]
        assert rt.revoke(grant, by="bob") == []
        workers.start("w2", env=env.worker_env())
        result = rt.result("pa-revoke", timeout=40)
        [refund] = result["outcomes"]
        assert refund["status"] == "REFUSED:lease"
        assert refund["content"].startswith("refused: not authorized") and refund["content"] in result["output"]
        assert refund_posts(env, input["payment"]) == []


def test_a_premise_that_changed_after_the_approval_is_refused_in_words_the_model_can_act_on(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "pa-stale")
        req = pending_request(rt, "pa-stale")
        env.admin("hand_refund", {"payment": input["payment"], "amount": 500})
        rt.approve_request(req["id"], by="alice")
        result = rt.result("pa-stale", timeout=40)
        [refund] = result["outcomes"]
        assert refund["status"] == "REFUSED:stale_premise"
        assert refund["content"] == "refused: the premise refunded_by_others changed from 0 to 500; nothing was sent"
        assert refund["content"] in result["output"]
        assert refund_posts(env, input["payment"]) == []
        assert [r["source"] for r in env.ledger(input["payment"])] == ["hand"]


def test_a_standing_grant_sends_without_a_request(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        grant = rt.grant("support", "refund", 5000, by="ops")
        input = start(rt, env, "pa-grant", policy="standing", grant=grant)
        result = rt.result("pa-grant", timeout=40)
        assert [o["status"] for o in result["outcomes"]] == ["COMMITTED"]
        assert [r for r in rt.approval_requests(status=None) if r["workflow_id"] == "pa-grant"] == []
        assert len(env.ledger(input["payment"])) == 1


def test_above_the_threshold_a_person_approves_below_it_the_grant_sends(rt, workers, tmp_path):
    """Policy.approval_above(1500, grant): the model's 2000 asks a person (Pydantic AI's
    conditional ApprovalRequired becomes an approval request); with the threshold at 2500 the
    same call sends under the grant, no request written."""
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        grant = rt.grant("support", "refund", 5000, by="ops")
        above = start(rt, env, "pa-above", policy="above", threshold=1500, grant=grant)
        req = pending_request(rt, "pa-above")
        assert req["payload"] == {"payment": above["payment"], "amount": 2000}
        rt.approve_request(req["id"], by="alice")
        assert [o["status"] for o in rt.result("pa-above", timeout=40)["outcomes"]] == ["COMMITTED"]
        below = start(rt, env, "pa-below", policy="above", threshold=2500, grant=grant)
        assert [o["status"] for o in rt.result("pa-below", timeout=40)["outcomes"]] == ["COMMITTED"]
        assert [r for r in rt.approval_requests(status=None) if r["workflow_id"] == "pa-below"] == []
        assert len(env.ledger(above["payment"])) == 1 and len(env.ledger(below["payment"])) == 1


# -- misuse: clear errors, nothing sent ------------------------------------------------------------


def test_misuse_is_named():
    from pydantic_ai import Agent
    from pydantic_ai.exceptions import UserError
    from pydantic_ai.models.test import TestModel

    from ilr.contrib.pydantic_ai import effect_tool, run

    def refund(payment: str, amount: int) -> str:
        """Refund."""

    # An effect tool outside a workflow: the plain Pydantic AI run (EMULATED TestModel) stops at it.
    agent = Agent(TestModel(), name="x", tools=[effect_tool(refund, target=object())])
    with pytest.raises(UserError, match="sends only inside an Interlock workflow"):
        agent.run_sync("go")
    with pytest.raises(UserError, match="no InterlockDurability"):
        run(None, Agent(TestModel(), name="x"), "go")


def test_a_provider_model_over_http_is_recorded_once_across_a_kill(rt, workers, tmp_path):
    """Pydantic AI's AnthropicModel (the real ``anthropic`` SDK's async client, over HTTP) against
    the Messages API stub (EMULATED tool use): the worker is SIGKILLed after the model answered the
    request that proposes the refund; the recovering worker asks it again (one discarded call,
    counted by the runtime and seen by the stub), and never asks again a request it recorded."""
    from demo.peers.targets_client import http_json

    with refund_env(tmp_path, tier=1) as env:
        assert http_json("POST", f"{env.model_url}/admin/script", {"agent": "refund"})[0] == 200
        input, result, _, approved = drive_with_kill(
            rt,
            workers,
            env,
            "pa-sdk",
            "decide_after_response@2",
            lambda: start(rt, env, "pa-sdk", model="messages-stub"),
        )
        [refund] = result["outcomes"]
        assert refund["status"] == "COMMITTED" and refund["input"] == approved["payload"]
        assert len(env.ledger(input["payment"])) == 1
        assert result["output"].startswith("Final answer: ") and '"COMMITTED"' in result["output"]
        decided = rows(rt, "pa-sdk", "decide")
        assert len(decided) == 3 and llm_calls(rt, "pa-sdk") == 4
        assert http_json("GET", f"{env.model_url}/admin/calls")[1]["by_case"]["pa-sdk"] == 4
        check_transcript_replays(rt, "pa-sdk", input, result)
