"""Bad input for effects, grants and receipts (issue 3) on a running refund: clear errors,
nothing sent or written. Real worker subprocesses and the real payment target. The rest is in
tests/integration/test_effects_bad_input.py."""

from __future__ import annotations

import pytest

from ilr import InvalidInput, WorkflowNotFound
from ilr._errors import EffectNotFound
from tests.support.db import write_counts
from tests.support.queries.claims import OWNER_OF_CLAIMS_BY_WORKFLOW_ID_ORPHAN
from tests.support.queries.journal import KIND_OF_JOURNAL_BY_EFFECT_ID
from tests.support.refund_harness import approve, refund_env, wait_for_approval_request


def test_approve_errors_write_nothing(rt, workers, tmp_path):
    with refund_env(tmp_path, 1) as env:
        rt.start("three_steps", "not-waiting", {})
        with pytest.raises(InvalidInput) as err:
            rt.approve("not-waiting", {"payment": "p", "amount": 1}, {}, by="alice")
        assert err.value.field == "workflow_id" and "not waiting for approval" in err.value.rule
        with pytest.raises(WorkflowNotFound):
            rt.approve("nobody", {"amount": 1}, {}, by="alice")
        workers.start("A", env=env.worker_env())
        case = env.case("bad1")
        rt.start("refund_signal", "bad1", case)
        proposal, facts = wait_for_approval_request(rt, "bad1")
        before = write_counts(rt)
        for payload, field in (
            ({"payment": "p", "amount": -5}, "payload.amount"),
            ({"payment": "p", "amount": 12.5}, "payload.amount"),
            ({"payment": "p", "amount": float("nan")}, "payload.amount"),
            ({"payment": b"p", "amount": 5}, "payload.payment"),
            # a fresh user's finds: what a bigint or jsonb would not keep, and size
            ({"payment": "p", "amount": 10**30}, "payload.amount"),
            ({"payment": "p", "amount": 5, "f": 1e16}, "payload.f"),
            ({"payment": "p", "amount": 5, "note": "x" * 1_100_000}, "payload"),
        ):
            with pytest.raises(InvalidInput) as err:
                rt.approve("bad1", payload, facts, by="alice")
            assert err.value.field == field
        with pytest.raises(InvalidInput) as err:
            rt.approve("bad1", proposal, facts, by="")
        assert err.value.field == "by"
        assert write_counts(rt) == before
        rt.approve("bad1", proposal, facts, by="alice")
        with pytest.raises(InvalidInput) as err:  # approving twice
            rt.approve("bad1", proposal, facts, by="carol")
        assert "approved already" in err.value.rule or "not waiting" in err.value.rule
        assert rt.result("bad1", timeout=60)["status"] == "COMMITTED"
        assert write_counts(rt)["grants"] == 1


def test_amount_above_the_grant_is_refused_and_nothing_sent(rt, workers, tmp_path):
    """A policy grant capping the amount below the decision: REFUSED:lease, no request sent."""
    from ilr import Worker  # noqa: F401 - documents that the workflow runs on real workers

    with refund_env(tmp_path, 1) as env:
        workers.start("A", env=env.worker_env())
        case = env.case("cap")
        rt.start("refund_signal", "cap", case)
        proposal, facts = wait_for_approval_request(rt, "cap")
        small = rt.grant("refund", "refund", max_cents=1000, by="policy")
        rt.signal("cap", "approve", {"grant_id": small, "payload": proposal, "facts_seen": facts})
        assert rt.result("cap", timeout=60)["status"] == "REFUSED:lease"
        assert [e for e in env.access_log() if e["path"] == "/refunds" and e["method"] == "POST"] == []


def test_reconcile_needs_evidence_and_an_ambiguous_effect(rt, workers, tmp_path):
    with pytest.raises(EffectNotFound):
        rt.reconcile("eff_nope", "ledger row 7", by="carol", applied=True)
    with refund_env(tmp_path, 3) as env:
        a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_dispatch"))
        case = env.case("amb")
        rt.start("refund_signal", "amb", case)
        approve(rt, "amb")
        a.wait(30)
        workers.start("B", lease_ttl=2, env=env.worker_env())
        result = rt.result("amb", timeout=60)
        assert result["status"] == "AMBIGUOUS"
        for evidence in ("", "   ", None, {}, []):
            with pytest.raises(InvalidInput) as err:
                rt.reconcile(result["effect_id"], evidence, by="carol", applied=False)
            assert err.value.field == "evidence"
        assert rt.ambiguous()[0]["reconciled"] is None
        rec = rt.reconcile(result["effect_id"], "ledger shows no refund for this payment", by="carol", applied=False)
        assert rec["by"] == "carol" and rec["applied"] is False
        # A reconcile adds one signed RECONCILED entry after what the runtime knew (issue 40, item 8).
        kinds = [
            e["kind"] for e in rt.connection().execute(KIND_OF_JOURNAL_BY_EFFECT_ID, (result["effect_id"],)).fetchall()
        ]
        assert kinds[-2:] == ["AMBIGUOUS", "RECONCILED"]


def test_recover_orphans_resolves_a_stuck_workflows_effect(rt, workers, tmp_path):
    """A worker dies after the send; the crash-loop guard (max_takeovers 0) marks the
    workflow stuck; ilr_check lists the orphan; recover_orphans leaves it alone while the
    target cannot be read (it raised ConnectionRefusedError before), then resolves the effect
    by lookup and restores the status."""
    from demo.serve import free_port
    from demo.workflows import target_for
    from tests.support.workers import check

    with refund_env(tmp_path, 2) as env:
        a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_send"))
        case = env.case("orphan")
        rt.start("refund_signal", "orphan", case)
        approve(rt, "orphan")
        a.wait(30)
        workers.start("B", lease_ttl=2, args=("--max-takeovers", "0"), env=env.worker_env())
        from tests.support.waits import wait_for

        wait_for(lambda: rt.describe("orphan")["status"] == "stuck", timeout=30, message="stuck")
        eff = rt.describe("orphan")["effects"][0]
        listed = check(workers)
        assert "1 orphaned dispatch(es)" in listed.stdout, listed.stdout
        assert f"{eff['effect_id']}  workflow orphan (stuck)" in listed.stdout
        target = target_for(case)
        first = rt.recover_orphans({target.name: target})
        if first[0]["outcome"] == "not settled yet":
            import time

            time.sleep(env.send_timeout + env.settle_margin)
        down = target_for({**case, "target": {**case["target"], "url": f"http://127.0.0.1:{free_port()}"}})
        unread = rt.recover_orphans({down.name: down})
        assert len(unread) == 1 and unread[0]["outcome"].startswith(
            "lookup failed, left dispatched: ConnectionRefusedError"
        ), unread
        assert rt.describe("orphan")["status"] == "stuck"
        assert rt.describe("orphan")["effects"][0]["state"] == "dispatched"
        report = rt.recover_orphans({target.name: target})
        assert report == [{"effect_id": eff["effect_id"], "workflow_id": "orphan", "outcome": "COMMITTED_ON_QUERY"}]
        assert rt.describe("orphan")["status"] == "stuck"
        assert rt.recover_orphans({target.name: target}) == []
        assert "orphaned" not in check(workers).stdout
        owners = [c["owner"] for c in rt.connection().execute(OWNER_OF_CLAIMS_BY_WORKFLOW_ID_ORPHAN).fetchall()]
        assert owners[-1] == "$recovery"
        assert len([r for r in env.ledger(case["payment"]) if r["source"] == "api"]) == 1
