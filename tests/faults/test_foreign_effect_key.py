"""A second workflow reusing another workflow's effect key (issue 39, docs/protocol.md §6.8): the
effect id derives from the key alone, so both calls reach one effect row and one journal chain.
The second workflow's refusal is recorded on its own step (status and reason), never appended to
the first effect's chain: the first receipt stays byte for byte as it was, and verifies the same.
Real worker subprocesses, the real HTTP target."""

from __future__ import annotations

import json

from ilr._journal import receipts
from tests.support.refund_harness import our_refunds, refund_env


def _run(rt, env, wf_id: str, case: dict, key: str, amount: int, grant: str) -> dict:
    rt.start(
        "keyed_refund",
        wf_id,
        {"url": env.target_url, "payment": case["payment"], "amount": amount, "key": key, "grant": grant},
    )
    return rt.result(wf_id, timeout=60)


def _receipt(rt, effect_id: str) -> tuple[str, dict]:
    bundle = rt.receipt(effect_id)
    return json.dumps(bundle, sort_keys=True, default=str), receipts.verify(bundle)


def _posts(env) -> list[dict]:
    return [e for e in env.access_log() if e["method"] == "POST" and e["path"] == "/refunds"]


def test_another_workflows_conflicting_payload_leaves_the_first_receipt_as_it_was(rt, workers, tmp_path):
    with refund_env(tmp_path, 1) as env:
        workers.start("A", lease_ttl=5, env=env.worker_env())
        case = env.case("shared")
        grant = rt.grant("keyed_refund", "refund", max_cents=5000, by="policy")
        first = _run(rt, env, "owner", case, "refund:shared", 2000, grant)
        assert first["status"] == "COMMITTED", workers.log("A")
        before, verified = _receipt(rt, first["effect_id"])
        assert verified["valid"] and verified["happened"] is True and verified["happened_once"] is True

        second = _run(rt, env, "reuser", case, "refund:shared", 3000, grant)
        assert second["effect_id"] == first["effect_id"]  # one key, one effect id
        assert second["status"] == "REFUSED:conflicting_payload", second
        after, reverified = _receipt(rt, first["effect_id"])
        assert after == before  # not one entry added to the first effect's chain
        assert reverified == verified
        why = second["result"]  # the refusal and its reason, on the second workflow's own step
        assert "payload differs from recorded decision" in why["reason"] and why["effect_owner"] == "owner", why
        assert [r["amount"] for r in our_refunds(env, case)] == [2000]
        assert [p["body"]["amount"] for p in _posts(env)] == [2000]  # 3000 never reached the target


def test_another_workflows_refusal_of_a_proposed_effect_leaves_the_first_receipt_as_it_was(rt, workers, tmp_path):
    """The first call is refused (its grant does not cover the amount): the effect stays
    proposed. A second workflow with the same key and payload, under a revoked grant, is
    refused too; its PROPOSED and REFUSED go nowhere near the first receipt."""
    with refund_env(tmp_path, 1) as env:
        workers.start("A", lease_ttl=5, env=env.worker_env())
        case = env.case("shared-refused")
        small = rt.grant("keyed_refund", "refund", max_cents=1000, by="policy")
        first = _run(rt, env, "owner2", case, "refund:shared-refused", 2000, small)
        assert first["status"] == "REFUSED:lease", workers.log("A")
        before, verified = _receipt(rt, first["effect_id"])
        assert verified["happened"] is False

        revoked = rt.grant("keyed_refund", "refund", max_cents=5000, by="policy")
        rt.revoke(revoked, by="alice")
        second = _run(rt, env, "reuser2", case, "refund:shared-refused", 2000, revoked)
        assert second["status"] == "REFUSED:lease" and second["effect_id"] == first["effect_id"], second
        after, reverified = _receipt(rt, first["effect_id"])
        assert after == before and reverified == verified
        assert second["result"]["effect_owner"] == "owner2" and second["result"]["reason"], second
        assert our_refunds(env, case) == [] and _posts(env) == []
