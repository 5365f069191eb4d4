"""Durable agents (ilr.agents) on real PostgreSQL, real ``ilr_worker`` subprocesses, the real HTTP
payment target and the Messages API stub driven by the real ``anthropic`` SDK (tool use is
EMULATED: scripted, per conversation). Workflow: tests.support.flows.agent_refund.

What is shown: a turn is recorded once and never asked again on replay (the transcript a
recovering worker rebuilds hashes to the fingerprints the first worker recorded); tool calls are
validated before anything runs; a side effect is sent only with the approved arguments and at
most once per recorded position, across a SIGKILL at every kill point of the path, at tiers 1, 2
and 3; refusals reach the model in words.
"""

from __future__ import annotations

import signal

import pytest

from demo.peers.targets_client import http_json
from ilr import _codec as codec
from ilr._agents import AMBIGUOUS_TEXT
from tests.support.agents import drive_with_kill, llm_calls, pending_request, refund_posts, start, steps
from tests.support.queries.approvals import COUNT_APPROVAL_REQUESTS
from tests.support.queries.effects import (
    COUNT_EFFECTS,
    EFFECT_ID_STATE_GRANT_ID_OF_EFFECTS,
    GRANT_ID_OF_EFFECTS,
    GRANT_ID_OF_EFFECTS_BY_STATE,
)
from tests.support.refund_harness import refund_env

# -- helpers -------------------------------------------------------------------------------------


def turn_rows(rt, wf_id: str) -> list[dict]:
    return [s for s in steps(rt, wf_id) if s["kind"] == "decide"]


def check_transcript_replays(rt, wf_id: str, input: dict, result: dict) -> None:
    """The transcript the workflow returned, cut at each turn, is exactly the request whose hash
    the worker that ran that turn recorded as its fingerprint (possibly a worker since killed)."""
    from tests.support.flows import refund_agent

    agent = refund_agent(input)
    rows = turn_rows(rt, wf_id)
    transcript = result["transcript"]
    assert len(rows) == result["turns"]
    assert agent.turn_fingerprints(transcript) == [r["fingerprint"] for r in rows]
    # ... computed independently of the agent's helper for the first turn:
    assert codec.sha256_hex(codec.canonical(agent.request_for(transcript[:1]))) == rows[0]["fingerprint"]
    for t, row in enumerate(rows):
        assert transcript[1 + 2 * t] == {"role": "assistant", "content": row["output"]["response"]["content"]}


def stub_calls(env) -> dict:
    return http_json("GET", f"{env.model_url}/admin/calls")[1]


# -- the happy path ------------------------------------------------------------------------------


def test_lookup_then_approved_refund_commits_once_and_the_model_answers(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "ag-ok")
        req = pending_request(rt, "ag-ok")
        # The request is for exactly the arguments the model proposed, with the facts the
        # lookup-time capture saw, keyed on the call's position (turn 1, block 1).
        assert req["payload"] == {"payment": input["payment"], "amount": 2000}
        assert req["effect_key"] == "agent:ag-ok:agent:1.1"
        assert req["premises"] == {"payment": input["payment"], "eligible": True, "refunded_by_others": 0}
        assert refund_posts(env, input["payment"]) == []  # nothing sent before the approval
        rt.approve_request(req["id"], by="alice")
        result = rt.result("ag-ok", timeout=40)
        assert result["stop"] == "end_turn" and result["turns"] == 3
        kinds = [(o["tool"], o["kind"], o["status"]) for o in result["outcomes"]]
        assert kinds == [("lookup_payment", "read", "ok"), ("issue_refund", "effect", "COMMITTED")]
        assert result["text"].startswith("Final answer: ") and '"COMMITTED"' in result["text"]
        assert [(r["payment"], r["amount"]) for r in env.ledger(input["payment"])] == [(input["payment"], 2000)]
        assert len(refund_posts(env, input["payment"])) == 1
        effect = rt.connection().execute(EFFECT_ID_STATE_GRANT_ID_OF_EFFECTS).fetchall()
        assert effect == [
            {
                "effect_id": codec.effect_id_for({"request_id": req["effect_key"]}),
                "state": "committed",
                "grant_id": rt.approval_request(req["id"])["grant_id"],
            }
        ]
        # The tool_result the model got for the refund is the committed effect.
        last_user = result["transcript"][-2]
        assert last_user["role"] == "user" and "is_error" not in last_user["content"][0]
        assert llm_calls(rt, "ag-ok") == 3 == stub_calls(env)["total"]
        check_transcript_replays(rt, "ag-ok", input, result)


# -- SIGKILL at each kill point --------------------------------------------------------------------


# (kill point, tier) -> (the refund's EffectResult status, applications at the target). The
# decision and lookup points are hit at turn 1 and at the lookup (the key step is the first step).
EXPECTED = {
    ("decide_after_response@2", 1): ("COMMITTED", 1),
    ("step_after_record@2", 1): ("COMMITTED", 1),
    ("effect_after_dispatch", 1): ("COMMITTED_BY_RETRY", 1),
    ("effect_after_send", 1): ("COMMITTED_BY_RETRY", 1),
    ("effect_after_commit", 1): ("COMMITTED", 1),
    ("effect_after_dispatch", 2): ("REAPPLIED_AFTER_QUERY", 1),
    ("effect_after_send", 2): ("COMMITTED_ON_QUERY", 1),
    ("effect_after_dispatch", 3): ("AMBIGUOUS", 0),
    ("effect_after_send", 3): ("AMBIGUOUS", 1),
}


@pytest.mark.parametrize("point,tier", list(EXPECTED), ids=[f"{p}-tier{t}" for p, t in EXPECTED])
def test_a_kill_at_each_point_applies_the_approved_refund_at_most_once(rt, workers, tmp_path, point, tier):
    status, applications = EXPECTED[(point, tier)]
    wf_id = f"ag-k{tier}-{point.split('@')[0]}"
    with refund_env(tmp_path, tier=tier) as env:
        input, result, at_kill, approved = drive_with_kill(
            rt, workers, env, wf_id, point, lambda: start(rt, env, wf_id)
        )
        payment = input["payment"]
        refund = [o for o in result["outcomes"] if o["tool"] == "issue_refund"]
        assert [o["status"] for o in refund] == [status], result["outcomes"]
        ledger = env.ledger(payment)
        assert len(ledger) == applications and all(r["amount"] == 2000 for r in ledger), ledger
        # Only the approved arguments ever reached the target.
        assert approved["payload"] == {"payment": payment, "amount": 2000}
        posts = refund_posts(env, payment)
        assert len(posts) >= applications and all(
            {k: p["body"][k] for k in ("payment", "amount")} == approved["payload"] for p in posts
        ), posts
        if status == "AMBIGUOUS":
            assert refund[0]["is_error"] and refund[0]["content"].startswith(AMBIGUOUS_TEXT)
            assert AMBIGUOUS_TEXT in result["text"]  # the model was told, and said so
        else:
            assert not refund[0]["is_error"] and f'"{status}"' in result["text"]
        # One decision per turn; a call discarded by the kill is counted, and only then.
        discarded = llm_calls(rt, wf_id) - len(turn_rows(rt, wf_id))
        assert discarded == (1 if point.startswith("decide_after_response") else 0)
        assert stub_calls(env)["total"] == llm_calls(rt, wf_id)
        # What w1 recorded before it died is replayed, not redone: the rows are unchanged, and the
        # transcript w2 rebuilt is the one each turn's recorded fingerprint names.
        after = {s["seq"]: s for s in steps(rt, wf_id)}
        assert at_kill and all(after[s["seq"]] == s for s in at_kill)
        check_transcript_replays(rt, wf_id, input, result)


def test_a_discarded_turn_never_sends_its_arguments(rt, workers, tmp_path):
    """The model proposes 2000, the worker dies before the turn is recorded; asked again it
    proposes 3000. Only 3000 is requested, approved and sent; the discarded call is counted."""
    with refund_env(tmp_path, tier=1) as env:
        input, result, _, approved = drive_with_kill(
            rt, workers, env, "ag-redo", "decide_after_response@2", lambda: start(rt, env, "ag-redo", script="redecide")
        )
        calls = [c for c in stub_calls(env)["calls"] if c["turn"] == 1]
        assert [c["amount"] for c in calls] == [2000, 3000]  # the model did propose 2000 first
        assert approved["payload"]["amount"] == 3000
        assert [r["amount"] for r in env.ledger(input["payment"])] == [3000]
        assert {p["body"]["amount"] for p in refund_posts(env, input["payment"])} == {3000}
        assert llm_calls(rt, "ag-redo") - len(turn_rows(rt, "ag-redo")) == 1
        check_transcript_replays(rt, "ag-redo", input, result)


def test_a_reset_that_proposes_other_arguments_is_refused_conflicting_payload(rt, workers, tmp_path):
    """w1 dies right after sending the refund; w2 recovers it; then the case is reset (rt.fork)
    to before the refund turn. The forked agent keeps the original's keys (the recorded key step);
    asked again the model proposes 3000 for the same call, which is REFUSED:conflicting_payload,
    and the model is told what stays bound. One refund (2000) in all; 3000 never reaches the
    target."""
    with refund_env(tmp_path, tier=1) as env:
        grant = rt.grant("agent_refund", "refund", max_cents=5000, by="policy")
        w1 = workers.start("w1", env=env.worker_env(ILR_KILL_AT="effect_after_send"))
        input = start(rt, env, "ag-orig", script="redecide", policy="standing", grant=grant)
        w1.wait(60)
        assert w1.returncode == -signal.SIGKILL, workers.log("w1")
        workers.start("w2", env=env.worker_env())
        original = rt.result("ag-orig", timeout=60)
        turn1 = next(s["seq"] for s in steps(rt, "ag-orig") if s["name"] == "agent:turn:1")
        rt.fork("ag-orig", turn1, "ag-fork")
        forked = rt.result("ag-fork", timeout=60)
        assert [o["status"] for o in original["outcomes"] if o["kind"] == "effect"] == ["COMMITTED_BY_RETRY"]
        refused = [o for o in forked["outcomes"] if o["kind"] == "effect"]
        assert [(o["status"], o["input"]["amount"]) for o in refused] == [("REFUSED:conflicting_payload", 3000)]
        assert refused[0]["effect_id"] == original["outcomes"][-1]["effect_id"]  # one key for one position
        assert refused[0]["is_error"] and '"amount": 2000' in refused[0]["content"]
        assert "conflicting_payload" in forked["text"]
        assert [r["amount"] for r in env.ledger(input["payment"])] == [2000]
        assert {p["body"]["amount"] for p in refund_posts(env, input["payment"])} == {2000}


# -- calls that are never sent --------------------------------------------------------------------


@pytest.mark.parametrize(
    "script,status,words",
    [
        ("unknown_tool", "unknown_tool", "there is no tool named 'wire_money'"),
        ("bad_args", "invalid_input", "amount: 'all of it' is not of type 'integer'"),
    ],
)
def test_an_unknown_tool_or_invalid_arguments_go_back_as_an_error_and_nothing_is_sent(
    rt, workers, tmp_path, script, status, words
):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        wf_id = f"ag-{script}"
        input = start(rt, env, wf_id, script=script)
        result = rt.result(wf_id, timeout=40)
        assert [(o["kind"], o["status"], o["is_error"]) for o in result["outcomes"]] == [("rejected", status, True)]
        tool_result = result["transcript"][2]["content"][0]
        assert tool_result["is_error"] is True and words in tool_result["content"]
        assert result["text"] == "Final answer: error: " + tool_result["content"]
        assert refund_posts(env, input["payment"]) == [] and env.ledger(input["payment"]) == []
        conn = rt.connection()
        assert conn.execute(COUNT_EFFECTS).fetchone()["n"] == 0
        assert conn.execute(COUNT_APPROVAL_REQUESTS).fetchone()["n"] == 0
        assert [s["kind"] for s in steps(rt, wf_id)] == ["step", "decide", "decide"]  # key, two turns


# -- refusals in words ---------------------------------------------------------------------------


def test_a_rejected_approval_tells_the_model_and_sends_nothing(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "ag-no")
        req = pending_request(rt, "ag-no")
        rt.reject_request(req["id"], by="bob", reason="refunded by phone already")
        result = rt.result("ag-no", timeout=40)
        refund = result["outcomes"][-1]
        assert refund["status"] == "not_approved:rejected" and refund["is_error"]
        assert refund["content"] == "not approved: refunded by phone already (rejected by bob)"
        assert result["text"] == "Final answer: error: " + refund["content"]
        assert refund_posts(env, input["payment"]) == []
        assert rt.connection().execute(COUNT_EFFECTS).fetchone()["n"] == 0


def test_a_premise_that_changed_after_the_approval_is_refused_and_named(rt, workers, tmp_path):
    """The facts are captured before the request; a refund by hand lands while the request
    waits; the approved send is REFUSED:stale_premise, and the model reads which premise moved."""
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "ag-stale")
        req = pending_request(rt, "ag-stale")
        env.admin("hand_refund", {"payment": input["payment"], "amount": 500})
        rt.approve_request(req["id"], by="alice")
        result = rt.result("ag-stale", timeout=40)
        refund = result["outcomes"][-1]
        assert refund["status"] == "REFUSED:stale_premise" and refund["is_error"]
        assert refund["content"] == "refused: the premise refunded_by_others changed from 0 to 500; nothing was sent"
        assert refund["content"] in result["text"]
        assert refund_posts(env, input["payment"]) == []
        assert [r["source"] for r in env.ledger(input["payment"])] == ["hand"]


def test_a_revoke_during_the_loop_stops_the_send(rt, workers, tmp_path):
    """The request is approved while no worker runs, then its grant is revoked: the next worker
    resumes the loop, T_dispatch refuses the send (REFUSED:lease), and the model is told."""
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "ag-revoke")
        req = pending_request(rt, "ag-revoke")
        workers.kill("w1")
        grant = rt.approve_request(req["id"], by="alice")["grant_id"]
        assert rt.revoke(grant, by="bob") == []  # nothing dispatched under it yet
        workers.start("w2", env=env.worker_env())
        result = rt.result("ag-revoke", timeout=40)
        refund = result["outcomes"][-1]
        assert refund["status"] == "REFUSED:lease" and refund["is_error"]
        assert refund["content"].startswith("refused: not authorized") and refund["content"] in result["text"]
        assert refund_posts(env, input["payment"]) == []


def test_policies_a_grant_below_the_threshold_and_a_grant_over_its_cap(rt, workers, tmp_path):
    """approval_above(2500, grant): 2000 sends under the grant with no request. standing(grant
    with max_cents 1000): the runtime refuses 2000 (REFUSED:lease) and the model is told."""
    with refund_env(tmp_path, tier=1) as env:
        big = rt.grant("agent_refund", "refund", max_cents=5000, by="policy")
        small = rt.grant("agent_refund", "refund", max_cents=1000, by="policy")
        workers.start("w1", env=env.worker_env())
        below = start(rt, env, "ag-below", policy="above", threshold=2500, grant=big)
        capped = start(rt, env, "ag-cap", policy="standing", grant=small)
        ok = rt.result("ag-below", timeout=40)
        assert ok["outcomes"][-1]["status"] == "COMMITTED"
        assert [r["amount"] for r in env.ledger(below["payment"])] == [2000]
        no = rt.result("ag-cap", timeout=40)
        assert no["outcomes"][-1]["status"] == "REFUSED:lease"
        assert no["outcomes"][-1]["content"].startswith("refused: not authorized")
        assert refund_posts(env, capped["payment"]) == []
        assert rt.connection().execute(COUNT_APPROVAL_REQUESTS).fetchone()["n"] == 0
        committed = rt.connection().execute(GRANT_ID_OF_EFFECTS_BY_STATE).fetchall()
        assert [r["grant_id"] for r in committed] == [big]


def test_above_the_threshold_a_person_approves(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        grant = rt.grant("agent_refund", "refund", max_cents=5000, by="policy")
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "ag-above", policy="above", threshold=1500, grant=grant)
        req = pending_request(rt, "ag-above")
        assert req["payload"] == {"payment": input["payment"], "amount": 2000}
        rt.approve_request(req["id"], by="carol")
        assert rt.result("ag-above", timeout=40)["outcomes"][-1]["status"] == "COMMITTED"
        effect = rt.connection().execute(GRANT_ID_OF_EFFECTS).fetchone()
        assert effect["grant_id"] == rt.approval_request(req["id"])["grant_id"] != grant


# -- building agents and tools (no database) -------------------------------------------------------


def test_tools_and_policies_are_checked_when_built():
    from ilr._agents import Agent, Policy, Tool

    schema = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}
    with pytest.raises(ValueError, match="needs a grant"):
        Policy(approve_above_cents=100)
    with pytest.raises(ValueError, match="exactly one"):
        Tool("t", "d", schema)
    with pytest.raises(ValueError, match="needs a Policy"):
        Tool("t", "d", schema, target=object())
    with pytest.raises(Exception, match="is not valid"):
        Tool.read("t", "d", {"type": "object", "properties": {"a": {"type": 7}}}, lambda a: a)
    with pytest.raises(ValueError, match="two tools"):
        Agent(model="m", tools=[Tool.read("t", "d", schema, len), Tool.read("t", "d", schema, len)])
    tool = Tool.read("t", "d", schema, len)
    assert tool.errors({"amount": 5}) == [] and tool.errors([1]) == ["the input must be a JSON object, got list"]
    assert tool.errors({}) == ["'amount' is a required property"]
    above = Policy.approval_above(1000, "grt_1")
    assert (
        above.needs_approval({"amount": 1000}),
        above.needs_approval({"amount": 1001}),
        above.needs_approval({}),
    ) == (False, True, True)
    assert Policy.approval().needs_approval({"amount": 1}) and not Policy.standing("g").needs_approval({})
