"""verify()'s P2 and P4 rules (docs/protocol.md §9) on receipts the runtime produced: the real
worker drives the real target (tests/support/refund_harness.py). The pure tests of the same rules,
over sealed chains built by hand, are in tests/unit/test_receipts_verify.py.
"""

from __future__ import annotations

import json

import pytest

from ilr._journal import receipts
from tests.support.queries.effects import ANY_EFFECTS_BY_WORKFLOW_ID_STATE
from tests.support.refund_harness import (
    approve,
    hand_refund,
    our_refunds,
    refund_env,
    run_case,
    wait_for_approval_request,
)
from tests.support.waits import wait_for

# -- the real runtime ---------------------------------------------------------------------------


def test_runtime_refused_recheck_keeps_assumptions_held(rt, workers, tmp_path):
    """S02 at tier 2: killed after T_dispatch (nothing sent), a hand refund while down, the
    recovery re-check sees the changed premise and refuses. Nothing was sent on it."""
    with refund_env(tmp_path, 2) as env:
        case, result, _ = run_case(rt, workers, env, "p4t2", "effect_after_dispatch", hand_refund)
        assert result["status"] == "REFUSED:stale_premise_at_recovery"
        assert our_refunds(env, case) == []
        v = receipts.verify(rt.receipt(result["effect_id"]))
        assert v["valid"] and v["chain_intact"] and v["happened"] is False
        refused = [e for e in map(json.loads, rt.receipt(result["effect_id"])["entries"]) if e["kind"] == "REFUSED"]
        assert refused and refused[-1]["rechecked"]["violations"]  # the re-check did find the change
        assert v["assumptions_held"] is True, v["problems"]


def test_runtime_tier1_resend_is_once(rt, workers, tmp_path):
    """S01 at tier 1: killed after the send, the resend under the same key is deduplicated."""
    with refund_env(tmp_path, 1) as env:
        case, result, _ = run_case(rt, workers, env, "p2t1", "effect_after_send")
        assert result["status"] == "COMMITTED_BY_RETRY"
        assert len(our_refunds(env, case)) == 1
        v = receipts.verify(rt.receipt(result["effect_id"]))
        assert v["happened"] is True and v["happened_once"] is True, v["problems"]


@pytest.mark.allow_violations("EffectAtMostOnceTier12")  # A2 broken on purpose: the conceded $40
def test_runtime_s08c_reapply_after_an_unanswered_send_is_unknown(rt, workers, tmp_path):
    """S08c at tier 2: the first send is processed send_timeout + settle_margin + 6 s after it
    arrives. The sender gives up (its watchdog ends it, or the socket times out), recovery's
    lookup finds nothing and reapplies, then the first request lands: two applications, and no
    LATE_RESULT. The receipt must not claim once (ReceiptTruthful checks it against the ledger)."""
    send_timeout, settle = 2.0, 2.0
    with refund_env(tmp_path, 2, send_timeout=send_timeout, settle_margin=settle) as env:
        env.admin("delay", {"seconds": send_timeout + settle + 6})
        a = workers.start("A", lease_ttl=2, env=env.worker_env())
        b = workers.start("B", lease_ttl=2, env=env.worker_env())
        case = env.case("s08c")
        rt.start("refund_signal", "s08c", case)
        approve(rt, "s08c")

        def sender_gave_up():
            if a.poll() is not None or b.poll() is not None:
                return True  # the watchdog's exit
            w = rt.describe("s08c")["waiting"] or {}
            return w.get("kind") == "effect"  # the socket timed out: suspended until settled

        wait_for(sender_gave_up, timeout=30, message="the first sender to give up")
        env.admin("delay", {"seconds": 0})  # only the first send is delayed
        result = rt.result("s08c", timeout=60)
        assert result["status"] == "REAPPLIED_AFTER_QUERY"
        wait_for(lambda: len(our_refunds(env, case)) == 2, timeout=30, message="the first send to land late")
        for proc in (a, b):
            assert proc.poll() in (None, 70)
        bundle = rt.receipt(result["effect_id"])
        kinds = [json.loads(body)["kind"] for body in bundle["entries"]]
        assert "LATE_RESULT" not in kinds
        v = receipts.verify(bundle)
        assert v["valid"] and v["chain_intact"] and v["happened"] is True
        assert v["happened_once"] == "unknown", v
        assert any("recovery-reapply" in p and "A2" in p for p in v["problems"])


def test_a_send_the_revoke_listed_in_flight_is_no_false_p3_claim(rt, workers, tmp_path, test_dsn):
    """S12's race, made certain: the grant is revoked after T_dispatch committed and before the
    target processed the send. The revoke lists the effect as in flight (RevokeLinearizable), the
    target applies it after the revoke returned, and the receipt says authorized_when_fired: true.
    The auditor's ground truth must agree with the oracle's S12 rule (a send the revoke listed
    may still land), so P3 is a correct answer, not a false claim."""
    import time

    from ilr import _db as db
    from prove.harness import audit, oracle

    with refund_env(tmp_path, 1, send_timeout=8.0, settle_margin=2.0) as env:
        workers.start("A", lease_ttl=30, env=env.worker_env())
        case = env.case("p3inflight")
        rt.start("refund_signal", case["id"], case)
        proposal, facts = wait_for_approval_request(rt, case["id"])
        env.admin("delay", {"seconds": 4})  # the send reaches the target, which holds it 4 s
        grant_id = rt.approve(case["id"], proposal, facts, by="alice")
        with db.connect(test_dsn, application_name="test-p3") as conn:
            wait_for(
                lambda: conn.execute(ANY_EFFECTS_BY_WORKFLOW_ID_STATE, (case["id"],)).fetchone(),
                timeout=30,
                message="T_dispatch to commit",
            )
        returned = rt.revoke(grant_id, by="bob")
        revoke_at = time.time()
        result = rt.result(case["id"], timeout=60)
        assert returned == [result["effect_id"]] and result["status"] == "COMMITTED"
        c = oracle.counts(
            oracle.observe(env.target_url, case["payment"]),
            approved_amount=proposal["amount"],
            revoke_at=revoke_at,
            revoke_returned=returned,
        )
        # The precondition of the case: the send was processed after the revoke returned.
        assert c["sends_after_revoke"] == 1 and c["sends_after_revoke_unlisted"] == 0, c
        answers = audit.audit_runtime(rt.receipt(result["effect_id"]))
        assert answers["P3"] is True and answers["verify"]["authorized_when_fired"] is True
        scored = audit.score(answers, oracle.ground_truth(c))
        assert scored["false_claims"] == 0 and scored["per"]["P3"] == 1, scored
