"""The receipt never says the premises held where a check found them changed, nor that a send
was authorized where the grant was refused: verify()'s ``refusals`` and the receipt page's words,
for a chain refused at dispatch and one refused at recovery, made by the real runtime (real
worker subprocesses, the real HTTP target, a hand refund as the changed premise, a revoke as the
refused grant)."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from ilr._journal import receipts
from tests.support.refund_harness import (
    hand_refund,
    our_refunds,
    refund_env,
    revoke,
    run_case,
    wait_for_approval_request,
)
from tests.support.review import client_for, user


def answers(rt, effect_id: str) -> dict[str, str]:
    """The receipt page's answers, {"P1": "verdict: explanation", ...}, as a reader sees them."""
    c = client_for(user("auditor", "approvals.approve"))
    page = c.get(reverse("approvals:receipt", args=[effect_id])).content.decode()
    out = {}
    for code, row in re.findall(r'<tr[^>]*data-answer="(P[1-5])"[^>]*>(.*?)</tr>', page, re.S):
        out[code] = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", row))).strip()
    return out


def _refused_at_dispatch(rt, workers, env, case_id: str, change) -> dict:
    """Approve with the facts the decision saw, after ``change`` altered the world: T_dispatch's
    check refuses and nothing is sent."""
    workers.start("A", lease_ttl=2, env=env.worker_env())
    case = env.case(case_id)
    rt.start("refund_signal", case_id, case)
    proposal, facts = wait_for_approval_request(rt, case_id)
    change(rt, env, case, proposal, facts)
    return case, rt.result(case_id, timeout=60)


def test_premises_changed_before_dispatch(rt, workers, tmp_path):
    def hand_refund_then_approve(rt, env, case, proposal, facts):
        env.admin("hand_refund", {"payment": case["payment"], "amount": 2000})
        rt.approve(case["id"], proposal, facts, by="alice")

    with refund_env(tmp_path, 1) as env:
        case, result = _refused_at_dispatch(rt, workers, env, "rw-premise", hand_refund_then_approve)
        assert result["status"] == "REFUSED:stale_premise" and our_refunds(env, case) == []
        v = receipts.verify(rt.receipt(result["effect_id"]))
        assert v["sends"] == 0 and v["assumptions_held"] is None and v["authorized_when_fired"] is None
        [r] = v["refusals"]
        assert r["at"] == "dispatch" and r["premise_violations"] and not r["grant_refused"]
        words = answers(rt, result["effect_id"])
        assert "Not applicable: nothing was sent" in words["P4"] and "premises had changed" in words["P4"], words
        assert "held" not in words["P4"] and "Yes" not in words["P4"], words
        assert "refused before it was sent" in words["P1"], words


def test_grant_revoked_before_dispatch(rt, workers, tmp_path):
    def approve_then_revoke_while_stopped(rt, env, case, proposal, facts):
        workers.kill("A")  # no worker: the approval waits, the revoke lands before any T_dispatch
        grant = rt.approve(case["id"], proposal, facts, by="alice")
        rt.revoke(grant, by="bob")
        workers.start("B", lease_ttl=2, env=env.worker_env())

    with refund_env(tmp_path, 1) as env:
        case, result = _refused_at_dispatch(rt, workers, env, "rw-grant", approve_then_revoke_while_stopped)
        assert result["status"] == "REFUSED:lease" and our_refunds(env, case) == []
        v = receipts.verify(rt.receipt(result["effect_id"]))
        [r] = v["refusals"]
        assert r["at"] == "dispatch" and r["grant_refused"]
        words = answers(rt, result["effect_id"])
        assert "Not applicable: nothing was sent" in words["P3"] and "grant no longer covered it" in words["P3"]
        assert "Yes" not in words["P3"] and "live, unrevoked" not in words["P3"], words


@pytest.mark.parametrize(
    "outage, expected, finding",
    [
        (hand_refund, "REFUSED:stale_premise_at_recovery", "premises had changed"),
        (revoke, "REFUSED:lease_at_recovery", "grant no longer covered it"),
    ],
)
def test_refused_at_recovery(rt, workers, tmp_path, outage, expected, finding):
    """Killed after T_dispatch at tier 2 (nothing sent), the world changes while down, and the
    recovery re-check refuses."""
    with refund_env(tmp_path, 2) as env:
        case, result, _ = run_case(rt, workers, env, f"rw-rec-{expected[9:14]}", "effect_after_dispatch", outage)
        assert result["status"] == expected and our_refunds(env, case) == []
        v = receipts.verify(rt.receipt(result["effect_id"]))
        assert any(r["at"] == "recovery" for r in v["refusals"]), v["refusals"]
        words = answers(rt, result["effect_id"])
        assert words["P1"].startswith("P1 Did it happen? No") and "Recovery refused it" in words["P1"], words
        assert finding in words["P1"], words
        if "premises" in finding:
            assert "no longer hold" in words["P4"] and "Yes, at every send" in words["P4"], words
        else:
            assert "Recovery later refused to send it again" in words["P3"], words
