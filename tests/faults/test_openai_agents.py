"""The OpenAI Agents SDK made durable (ilr.contrib.openai_agents) on real PostgreSQL, real
``ilr_worker`` subprocesses, the real HTTP payment target and the real SDK (its ``Agent``,
``Runner``, ``function_tool``, ``needs_approval`` and ``RunState.approve/reject``); the model is
EMULATED (demo.agent_openai.EmulatedRefundModel: an SDK ``Model`` scripted from the conversation).
Workflow: demo.agent_openai.agent_refund_openai.

What is shown: each model call is recorded once and never asked again on replay (the transcript a
recovering worker rebuilt carries exactly the recorded responses, and each turn's request hashes
to the fingerprint the first worker recorded, or the replay would be NonDeterminism); the SDK's
interruption is an approval request for the hash of the exact arguments; a side effect is sent
only with the approved arguments and at most once per recorded position across a SIGKILL at a
representative set of kill points at tiers 1, 2 and 3 (the full matrix: ``manage.py
agents_report --framework openai-agents``); refusals reach the model in words.
"""

from __future__ import annotations

import pytest

import demo.agent_openai  # noqa: F401 - registers agent_refund_openai in this process
from demo.agent_openai import refund_agent
from ilr import _codec as codec
from ilr._agents import AMBIGUOUS_TEXT
from ilr.contrib.openai_agents.replay import request_fingerprints
from tests.support.agents import drive_with_kill, llm_calls, pending_request, refund_posts, steps
from tests.support.queries.approvals import COUNT_APPROVAL_REQUESTS
from tests.support.queries.effects import COUNT_EFFECTS, EFFECT_ID_STATE_GRANT_ID_OF_EFFECTS, GRANT_ID_OF_EFFECTS
from tests.support.refund_harness import refund_env

IMPORT = ("--import", "demo.agent_openai")
WORKFLOW = "agent_refund_openai"


# -- helpers -------------------------------------------------------------------------------------


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
    rt.start(WORKFLOW, wf_id, full)
    return full


def turn_rows(rt, wf_id: str) -> list[dict]:
    return [s for s in steps(rt, wf_id) if s["kind"] == "decide"]


def check_transcript_replays(rt, wf_id: str, result: dict) -> None:
    """The model's items in the returned transcript are exactly the recorded responses, turn by
    turn, each recorded once, and each is marked EMULATED."""
    rows = turn_rows(rt, wf_id)
    assert len(rows) == result["turns"]
    assert [r["name"] for r in rows] == [f"agent:turn:{t}" for t in range(len(rows))]
    recorded = [item for r in rows for item in r["output"]["response"]["output"]]
    from_model = [i for i in result["transcript"] if i.get("type") in ("message", "function_call")]
    from_model = [i for i in from_model if i.get("type") == "function_call" or i.get("role") == "assistant"]
    assert from_model == recorded
    assert all(r["output"]["response"]["emulated"] is True for r in rows)
    # Each turn's request, rebuilt from the transcript, hashes to the recorded fingerprint.
    agent = refund_agent({"url": "http://unused"})
    assert request_fingerprints(agent, result["transcript"]) == [r["fingerprint"] for r in rows]


# -- the happy path ------------------------------------------------------------------------------


def test_lookup_then_approved_refund_commits_once_and_the_model_answers(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env(), args=IMPORT)
        input = start(rt, env, "oa-ok")
        req = pending_request(rt, "oa-ok")
        # needs_approval became a request for exactly the arguments the model proposed (their
        # hash), with the facts captured before it, keyed on the call's position (turn 1, item 1).
        payload = {"payment": input["payment"], "amount": 2000}
        assert req["payload"] == payload
        assert req["payload_hash"] == codec.sha256_hex(codec.canonical(payload))
        assert req["effect_key"] == "openai-agents:oa-ok:agent:1.1"
        assert req["premises"] == {"payment": input["payment"], "eligible": True, "refunded_by_others": 0}
        assert refund_posts(env, input["payment"]) == []  # nothing sent before the approval
        rt.approve_request(req["id"], by="alice")
        result = rt.result("oa-ok", timeout=40)
        assert result["turns"] == 3 and result["last_agent"] == "support"
        kinds = [(o["tool"], o["kind"], o["status"]) for o in result["outcomes"]]
        assert kinds == [("lookup_payment", "read", "ok"), ("issue_refund", "effect", "COMMITTED")]
        assert result["final_output"].startswith("Final answer: ") and '"COMMITTED"' in result["final_output"]
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
        names = [s["name"] for s in steps(rt, "oa-ok")]
        assert names[:4] == ["agent:key", "agent:turn:0", "agent:tool:0.0:lookup_payment", "agent:turn:1"]
        assert llm_calls(rt, "oa-ok") == 3
        check_transcript_replays(rt, "oa-ok", result)


# -- SIGKILL at kill points (a representative subset; the full matrix is agents_report's) ---------


# (kill point, tier) -> (the refund's EffectResult status, applications at the target). ``@2``:
# the second hit: the turn that proposes the refund; the lookup step (the key step is the first).
EXPECTED = {
    ("decide_after_response@2", 1): ("COMMITTED", 1),
    ("step_after_record@2", 1): ("COMMITTED", 1),
    ("effect_after_send", 1): ("COMMITTED_BY_RETRY", 1),
    ("effect_after_commit", 1): ("COMMITTED", 1),
    ("effect_after_dispatch", 2): ("REAPPLIED_AFTER_QUERY", 1),
    ("effect_after_send", 3): ("AMBIGUOUS", 1),
}


@pytest.mark.parametrize("point,tier", list(EXPECTED), ids=[f"{p}-tier{t}" for p, t in EXPECTED])
def test_a_kill_applies_the_approved_refund_at_most_once_and_the_transcript_replays(rt, workers, tmp_path, point, tier):
    status, applications = EXPECTED[(point, tier)]
    wf_id = f"oa-k{tier}-{point.split('@')[0]}"
    with refund_env(tmp_path, tier=tier) as env:
        input, result, at_kill, approved = drive_with_kill(
            rt, workers, env, wf_id, point, lambda: start(rt, env, wf_id), args=IMPORT
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
            assert AMBIGUOUS_TEXT in result["final_output"]  # the model was told, and said so
        else:
            assert not refund[0]["is_error"] and f'"{status}"' in result["final_output"]
        # One decision per turn; a call discarded by the kill is counted, and only then.
        discarded = llm_calls(rt, wf_id) - len(turn_rows(rt, wf_id))
        assert discarded == (1 if point.startswith("decide_after_response") else 0)
        # What w1 recorded before it died was replayed, not redone (the rows are unchanged; a
        # request that hashed otherwise would have been NonDeterminism).
        after = {s["seq"]: s for s in steps(rt, wf_id)}
        assert at_kill and all(after[s["seq"]] == s for s in at_kill)
        assert {s["epoch"] for s in turn_rows(rt, wf_id)} >= {1}
        check_transcript_replays(rt, wf_id, result)


# -- refusals in words ---------------------------------------------------------------------------


def test_a_rejected_approval_is_the_sdk_rejection_the_model_reads_and_nothing_is_sent(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env(), args=IMPORT)
        input = start(rt, env, "oa-no")
        req = pending_request(rt, "oa-no")
        rt.reject_request(req["id"], by="bob", reason="refunded by phone already")
        result = rt.result("oa-no", timeout=40)
        refund = result["outcomes"][-1]
        assert refund["status"] == "not_approved:rejected" and refund["is_error"]
        assert refund["content"] == "not approved: refunded by phone already (rejected by bob)"
        assert result["final_output"] == "Final answer: " + refund["content"]
        # The SDK's own RunState.reject carried the words as the call's output.
        outputs = [i for i in result["transcript"] if i.get("type") == "function_call_output"]
        assert outputs[-1]["output"] == refund["content"]
        assert refund_posts(env, input["payment"]) == []
        assert rt.connection().execute(COUNT_EFFECTS).fetchone()["n"] == 0


def test_a_premise_that_changed_while_waiting_is_refused_and_named(rt, workers, tmp_path):
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env(), args=IMPORT)
        input = start(rt, env, "oa-stale")
        req = pending_request(rt, "oa-stale")
        env.admin("hand_refund", {"payment": input["payment"], "amount": 500})
        rt.approve_request(req["id"], by="alice")
        result = rt.result("oa-stale", timeout=40)
        refund = result["outcomes"][-1]
        assert refund["status"] == "REFUSED:stale_premise" and refund["is_error"]
        assert refund["content"] == "refused: the premise refunded_by_others changed from 0 to 500; nothing was sent"
        assert refund["content"] in result["final_output"]
        assert refund_posts(env, input["payment"]) == []
        assert [r["source"] for r in env.ledger(input["payment"])] == ["hand"]


def test_a_revoke_during_the_loop_stops_the_send(rt, workers, tmp_path):
    """Approved while no worker runs, then revoked: the next worker resumes the SDK's run, the
    send is refused at T_dispatch (REFUSED:lease) and the model is told."""
    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env(), args=IMPORT)
        input = start(rt, env, "oa-revoke")
        req = pending_request(rt, "oa-revoke")
        workers.kill("w1")
        grant = rt.approve_request(req["id"], by="alice")["grant_id"]
        assert rt.revoke(grant, by="bob") == []  # nothing dispatched under it yet
        workers.start("w2", env=env.worker_env(), args=IMPORT)
        result = rt.result("oa-revoke", timeout=40)
        refund = result["outcomes"][-1]
        assert refund["status"] == "REFUSED:lease" and refund["is_error"]
        assert refund["content"].startswith("refused: not authorized") and refund["content"] in result["final_output"]
        assert refund_posts(env, input["payment"]) == []


def test_edited_arguments_at_an_approved_call_are_a_different_payload_and_refused(rt, workers, tmp_path):
    """The SDK binds an approval to a call id. Here: 2000 is approved and sent; the case is reset
    (rt.fork) to before the refund turn and the model, asked again, proposes 3000 under the same
    call id. Those edited arguments are a new payload: a new approval request with their own
    hash, and approving it does not send them: the recorded position stays bound to 2000
    (REFUSED:conflicting_payload), and the model reads which arguments stay bound."""
    with refund_env(tmp_path, tier=1) as env:
        marker = tmp_path / "edit"
        workers.start("w1", env=env.worker_env(), args=IMPORT)
        input = start(rt, env, "oa-orig", edit_when=str(marker))
        first = pending_request(rt, "oa-orig")
        rt.approve_request(first["id"], by="alice")
        original = rt.result("oa-orig", timeout=40)
        assert original["outcomes"][-1]["status"] == "COMMITTED"
        marker.write_text("the model changes its mind")
        turn1 = next(s["seq"] for s in steps(rt, "oa-orig") if s["name"] == "agent:turn:1")
        rt.fork("oa-orig", turn1, "oa-fork")
        second = pending_request(rt, "oa-fork")
        assert second["payload"] == {"payment": input["payment"], "amount": 3000}
        assert second["payload_hash"] != first["payload_hash"] and second["effect_key"] == first["effect_key"]
        rt.approve_request(second["id"], by="alice")
        forked = rt.result("oa-fork", timeout=40)
        refused = forked["outcomes"][-1]
        assert (refused["status"], refused["input"]["amount"]) == ("REFUSED:conflicting_payload", 3000)
        assert refused["is_error"] and '"amount": 2000' in refused["content"]
        assert "conflicting_payload" in forked["final_output"]
        assert [r["amount"] for r in env.ledger(input["payment"])] == [2000]
        assert {p["body"]["amount"] for p in refund_posts(env, input["payment"])} == {2000}


# -- policies and bad input ----------------------------------------------------------------------


def test_below_the_threshold_the_grant_sends_above_it_a_person_approves(rt, workers, tmp_path):
    """``Policy.approval_above(cents, grant)`` is the SDK's per-call ``needs_approval``: 2000
    cents under a 5000 threshold sends under the standing grant with no interruption; under a
    1000 threshold the same call waits on an approval request."""
    with refund_env(tmp_path, tier=1) as env:
        grant = rt.grant("agent_refund_openai", "refund", max_cents=5000, by="policy")
        workers.start("w1", env=env.worker_env(), args=IMPORT)
        below = start(rt, env, "oa-below", policy="above", threshold=5000, grant=grant)
        result = rt.result("oa-below", timeout=40)
        assert [(o["tool"], o["status"]) for o in result["outcomes"]][-1] == ("issue_refund", "COMMITTED")
        effect = rt.connection().execute(GRANT_ID_OF_EFFECTS).fetchone()
        assert effect["grant_id"] == grant
        assert [r["amount"] for r in env.ledger(below["payment"])] == [2000]
        above = start(rt, env, "oa-above", policy="above", threshold=1000, grant=grant)
        req = pending_request(rt, "oa-above")
        assert req["payload"] == {"payment": above["payment"], "amount": 2000}
        rt.approve_request(req["id"], by="alice")
        assert rt.result("oa-above", timeout=40)["outcomes"][-1]["status"] == "COMMITTED"
        assert rt.connection().execute(COUNT_APPROVAL_REQUESTS).fetchone()["n"] == 1


def test_tools_are_checked_when_built_and_when_run():
    from agents import Agent, function_tool

    from demo.peers.targets_client import LocalRefunds
    from ilr._errors import InvalidInput
    from ilr.contrib.openai_agents import effect_tool
    from ilr.contrib.openai_agents._run import DurableRun

    target = LocalRefunds("http://127.0.0.1:9", tier=1)

    def refund(payment: str, amount: int) -> None:
        """Refund."""

    with pytest.raises(InvalidInput, match="needs_approval, a grant, or both"):
        effect_tool(target)(refund)
    with pytest.raises(InvalidInput, match="needs an effect target"):
        effect_tool(object(), needs_approval=True)(refund)
    tool = effect_tool(target, needs_approval=True)(refund)
    assert tool.name == "refund" and tool.params_json_schema["required"] == ["payment", "amount"]

    @function_tool(needs_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return "sent"

    with pytest.raises(InvalidInput, match="'wire' of agent 'a' needs approval but is a plain function tool"):
        DurableRun(None, "agent").prepare(Agent(name="a", tools=[wire]))
    # Run by the SDK's own Runner (no workflow), an effect tool refuses to send: the EMULATED
    # model's first call is lookup_payment, here an effect tool under a standing grant.
    import asyncio

    from agents import Runner
    from agents.exceptions import UserError

    from demo.agent_openai import agent_prompt, run_config

    schema = {
        "type": "object",
        "properties": {"payment": {"type": "string"}},
        "required": ["payment"],
        "additionalProperties": False,
    }
    lookup = effect_tool(target, grant="g", name="lookup_payment", params_json_schema=schema)
    agent = Agent(name="a", model="m", tools=[lookup])
    with pytest.raises(UserError, match="runs only under ilr.contrib.openai_agents.DurableRunner"):
        asyncio.run(Runner.run(agent, agent_prompt("c", "pay_1"), run_config=run_config({})))
    with pytest.raises(InvalidInput, match="two effect tools are named 'refund'"):
        DurableRun(None, "agent").prepare(
            Agent(name="a", tools=[tool], handoffs=[Agent(name="b", tools=[effect_tool(target, grant="g")(refund)])])
        )


# -- the demo ------------------------------------------------------------------------------------


def test_demo_agent_in_the_openai_agents_sdk_replays_and_sends_once(clean_db, tmp_path):
    """``demo --agent --framework openai-agents``: the support case written for the SDK, its
    conversation, the approval of the exact arguments, a SIGKILL after the target answered, one
    refund and a receipt that verifies."""
    import re
    import subprocess
    import sys

    from tests.support import ROOT
    from tests.support.workers import WorkerProcs

    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "demo", "--agent", "--framework", "openai-agents"],
        cwd=ROOT,
        env=WorkerProcs(tmp_path).env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "OpenAI Agents SDK" in out.splitlines()[0]
    conversation = out[out.index("\nConversation") : out.index("\nAnswer to the customer")]
    payment = re.search(r"payment (pay_ticket-\S+),", out).group(1)
    assert f'function_call issue_refund {{"payment":"{payment}","amount":2000}}' in conversation
    assert "function_call_output for issue_refund: " in conversation and "COMMITTED_BY_RETRY" in conversation
    assert conversation.count("(model):") == 3
    assert "SIGKILLed at kill point effect_after_send" in out
    assert "the transcript replays identically" in out and "model calls made 3, recorded 3" in out
    ledger = out[out.index("\nLedger") : out.index("\nEffectResult")]
    assert len(re.findall(r"^  refund re_\w+: 2000 cents", ledger, re.MULTILINE)) == 1, ledger
    assert "OK: the conversation replays, and the approval, the ledger and the receipt agree." in out
