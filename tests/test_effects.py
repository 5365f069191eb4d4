"""Gated effects against the real HTTP target with real SIGKILLs (issue 3): scenarios S01, S02, S03
at tiers 1, 2, 3 (docs/protocol.md §16.3), checked from the target's ledger and access log."""

from __future__ import annotations

import signal

import pytest

from ilr import InvalidInput
from ilr._journal import receipts
from tests.refund_harness import approve, refund_env


def run_case(rt, workers, env, case_id, kill_at, during_outage=None):
    a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT=kill_at))
    case = env.case(case_id)
    rt.start("refund_signal", case_id, case)
    grant_id, proposal = approve(rt, case_id)
    a.wait(30)
    assert a.returncode == -signal.SIGKILL, workers.log("A")
    if during_outage:
        during_outage(rt, env, case, grant_id)
    workers.start("B", lease_ttl=2, env=env.worker_env())
    result = rt.result(case_id, timeout=60)
    return case, result, proposal


def our_refunds(env, case):
    return [r for r in env.ledger(case["payment"]) if r["source"] == "api"]


def total(env, case):
    return sum(r["amount"] for r in env.ledger(case["payment"]))


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


def _hand_refund(rt, env, case, grant_id):
    env.admin("hand_refund", {"payment": case["payment"], "amount": 2000})


@pytest.mark.parametrize(
    "tier, expected",
    [(1, "REFUSED:stale_premise_at_recovery"), (2, "REFUSED:stale_premise_at_recovery"), (3, "AMBIGUOUS")],
)
def test_s02_hand_refund_during_outage(rt, workers, tmp_path, tier, expected):
    with refund_env(tmp_path, tier) as env:
        case, result, _ = run_case(rt, workers, env, f"s02t{tier}", "effect_after_dispatch", _hand_refund)
        assert result["status"] == expected
        assert our_refunds(env, case) == []
        assert total(env, case) == 2000  # the hand refund only


def _revoke(rt, env, case, grant_id):
    effect_id = rt.describe(case["id"])["effects"][0]["effect_id"]
    assert rt.revoke(grant_id, by="bob") == [effect_id]
    # Revoked once: a second revoke is refused, and its error still names what may land.
    with pytest.raises(InvalidInput) as err:
        rt.revoke(grant_id, by="carol")
    assert err.value.field == "grant_id" and "already revoked by bob" in err.value.rule
    assert err.value.rule.endswith(f"which may land: {effect_id}")


@pytest.mark.parametrize(
    "tier, expected", [(1, "REFUSED:lease_at_recovery"), (2, "REFUSED:lease_at_recovery"), (3, "AMBIGUOUS")]
)
def test_s03_revoked_during_outage(rt, workers, tmp_path, tier, expected):
    with refund_env(tmp_path, tier) as env:
        case, result, _ = run_case(rt, workers, env, f"s03t{tier}", "effect_after_dispatch", _revoke)
        assert result["status"] == expected
        assert total(env, case) == 0
        assert [e for e in env.access_log() if e["path"] == "/refunds" and e["method"] == "POST"] == []
