"""A recovery resend carries the payload bound at the first PROPOSED, whatever the replay offers,
and a target's rejection of a resend after an unanswered first send never reads as "not applied".

Real worker subprocesses against the real HTTP target (tier 1). The workflow (tests.support.flows
live_amount) reads its amount outside any step, so its replay offers 700 for the key whose first
send (500) the target applied and answered with a 500 (a lost success, EMULATED by fail_next).
"""

from __future__ import annotations

import pytest

from ilr import _db as db
from ilr._journal import receipts
from tests.support.queries.effects import STATE_PAYLOAD_OF_EFFECTS_BY_EFFECT_ID
from tests.support.refund_harness import refund_env
from tests.support.waits import wait_for


def _posts(env):
    return [e for e in env.access_log() if e["method"] == "POST" and e["path"] == "/refunds"]


def _start(rt, workers, env, tmp_path, case_id: str, amount_file):
    grant = rt.grant("agent", "refund", max_cents=1000, by="ops")
    case = env.case(case_id, amount_file=str(amount_file), grant_id=grant)
    workers.start("A", lease_ttl=2, env=env.worker_env())
    rt.start("live_amount", case_id, case)
    # The first send: applied by the target, answered 500 (its outcome is unknown to the runtime).
    first = wait_for(lambda: _posts(env), timeout=30, message="the first POST /refunds")
    assert first[0]["applied"] and first[0]["body"]["amount"] == 500
    return case


def _effect(test_dsn, effect_id):
    with db.connect(test_dsn) as conn:
        return conn.execute(STATE_PAYLOAD_OF_EFFECTS_BY_EFFECT_ID, (effect_id,)).fetchone()


@pytest.mark.parametrize("answer", ["400", "409", "replay"])
def test_resend_carries_the_bound_payload(rt, workers, tmp_path, test_dsn, answer):
    amount_file = tmp_path / "amount"
    amount_file.write_text("500")
    with refund_env(tmp_path, tier=1) as env:
        env.admin("key_conflict", {"answer": answer})
        env.admin("fail_next", {"status": 500, "apply": True})
        case = _start(rt, workers, env, tmp_path, f"bound-{answer}", amount_file)
        # The replay after the settle wait offers another amount for the same key.
        amount_file.write_text("700")
        out = rt.result(case["id"], timeout=60)
        posts = _posts(env)
        # One resend, under the key, with the bound body: the target replays its stored refund.
        assert [p["body"]["amount"] for p in posts] == [500, 500], posts
        assert [r["amount"] for r in env.ledger(case["payment"])] == [500]
        # The recorded send is resolved first (applied once); then the new offer is refused.
        assert out["status"] == "REFUSED:conflicting_payload"
        eff = _effect(test_dsn, out["effect_id"])
        assert eff["state"] == "committed" and eff["payload"]["amount"] == 500
        v = receipts.verify(rt.receipt(out["effect_id"]))
        assert v["happened"] is True and v["happened_once"] is True, v


@pytest.mark.parametrize(
    "queryable, status, state", [(False, "AMBIGUOUS", "ambiguous"), (True, "COMMITTED_ON_QUERY", "committed")]
)
def test_rejected_resend_is_not_a_refusal(rt, workers, tmp_path, test_dsn, queryable, status, state):
    amount_file = tmp_path / "amount"
    amount_file.write_text("500")
    with refund_env(tmp_path, tier=1, queryable=queryable) as env:
        env.admin("fail_next", {"status": 500, "apply": True})
        case = _start(rt, workers, env, tmp_path, f"rejected-{queryable}", amount_file)
        # The resend is refused with nothing applied: that says nothing about the first send.
        env.admin("fail_next", {"status": 400, "apply": False})
        out = rt.result(case["id"], timeout=60)
        assert [p["status"] for p in _posts(env)] == [500, 400]
        assert [r["amount"] for r in env.ledger(case["payment"])] == [500]
        assert out["status"] == status
        assert _effect(test_dsn, out["effect_id"])["state"] == state
        v = receipts.verify(rt.receipt(out["effect_id"]))
        assert v["happened"] == (True if queryable else "unknown"), v
