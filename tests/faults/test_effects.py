"""Gated effects against the real HTTP target with real SIGKILLs (issue 3): scenarios S01, S02, S03
at tiers 1, 2, 3 (docs/protocol.md §16.3), checked from the target's ledger and access log."""

from __future__ import annotations

import pytest

from ilr._journal import receipts
from tests.support.refund_harness import hand_refund, our_refunds, refund_env, revoke, run_case, total


@pytest.mark.parametrize("tier, expected", [(1, "COMMITTED_BY_RETRY"), (2, "COMMITTED_ON_QUERY"), (3, "AMBIGUOUS")])
def test_s01_crash_after_send(rt, workers, tmp_path, tier, expected):
    with refund_env(tmp_path, tier) as env:
        case, result, proposal = run_case(rt, workers, env, f"s01t{tier}", "effect_after_send")
        assert result["status"] == expected
        assert len(our_refunds(env, case)) == 1  # one application at every tier
        assert total(env, case) == proposal["amount"] == 2000
        posts = [e for e in env.access_log() if e["method"] == "POST" and e["path"] == "/refunds"]
        assert len(posts) == (2 if tier == 1 else 1)  # tier 1 resends under the key; 2 and 3 never resend
        v = receipts.verify(rt.receipt(result["effect_id"]))
        assert v["chain_intact"] and v["valid"]
        assert v["happened"] == ("unknown" if tier == 3 else True)


@pytest.mark.parametrize(
    "tier, expected",
    [(1, "REFUSED:stale_premise_at_recovery"), (2, "REFUSED:stale_premise_at_recovery"), (3, "AMBIGUOUS")],
)
def test_s02_hand_refund_during_outage(rt, workers, tmp_path, tier, expected):
    with refund_env(tmp_path, tier) as env:
        case, result, _ = run_case(rt, workers, env, f"s02t{tier}", "effect_after_dispatch", hand_refund)
        assert result["status"] == expected
        assert our_refunds(env, case) == []
        assert total(env, case) == 2000  # the hand refund only


@pytest.mark.parametrize(
    "tier, expected", [(1, "REFUSED:lease_at_recovery"), (2, "REFUSED:lease_at_recovery"), (3, "AMBIGUOUS")]
)
def test_s03_revoked_during_outage(rt, workers, tmp_path, tier, expected):
    with refund_env(tmp_path, tier) as env:
        case, result, _ = run_case(rt, workers, env, f"s03t{tier}", "effect_after_dispatch", revoke)
        assert result["status"] == expected
        assert total(env, case) == 0
        assert [e for e in env.access_log() if e["path"] == "/refunds" and e["method"] == "POST"] == []
