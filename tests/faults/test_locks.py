"""``ctx.lock`` on the real thing (issue 42): a durable lock around part of a workflow, raced by
worker subprocesses, held through sleeps and waits without a worker, released at the block's
end, on a failure inside it, on cancel and on the workflow's end, and re-checked by a gated
effect inside it after a revoke. Workflow: tests.support.flows_flow_control.locked."""

from __future__ import annotations

import pytest

from ilr import InvalidInput, WorkflowFailed
from tests.support.db import invocations
from tests.support.overlap import assert_one_at_a_time
from tests.support.refund_harness import refund_env
from tests.support.waits import wait_for


def lock_state(rt, key):
    c = rt.concurrency(key)
    return [h["workflow_id"] for h in c["holders"]], [w["workflow_id"] for w in c["waiting"]]


def test_two_workers_never_run_two_blocks_of_one_lock_at_once(rt, workers):
    """Twelve workflows on two workers take one lock: their blocks never overlap, while the
    steps outside the blocks are free to."""
    workers.start("A", concurrency=4)
    workers.start("B", concurrency=4)
    ids = [f"l{i:02d}" for i in range(12)]
    for wf in ids:
        rt.start("locked", wf, {"lock": "ledger", "seconds": 0.05})
    for wf in ids:
        rt.result(wf, timeout=120)
    assert_one_at_a_time(rt, dict.fromkeys(ids, "ledger"))
    assert lock_state(rt, "ledger") == ([], [])
    steps = {s["name"]: s for s in rt.describe("l00")["steps"]}
    assert steps["lock:ledger"]["kind"] == "lock" and steps["unlock:ledger"]["output"] == {
        "key": "ledger",
        "released": True,
    }


def test_a_block_holds_its_lock_through_a_wait_without_a_worker_and_releases_at_its_end(rt, workers):
    """The holder waits on a signal inside its block (no worker slot used: the one slot runs
    other work); a second taker waits; the block's end releases the lock while the workflow
    itself goes on waiting after it."""
    workers.start("A", concurrency=1)
    rt.start("locked", "holder", {"lock": "books", "wait_inside": True, "wait_after": True})
    wait_for(lambda: rt.describe("holder")["status"] == "sleeping", message="holder waits inside its block")
    rt.start("locked", "taker", {"lock": "books"})
    wait_for(lambda: lock_state(rt, "books") == (["holder"], ["taker"]), message="taker waits for the lock")
    assert invocations(rt, "taker", "enter") == 0
    rt.signal("holder", "go")
    assert rt.result("taker", timeout=30) == {}
    wait_for(lambda: rt.describe("holder")["status"] == "sleeping", message="holder waits after its block")
    assert lock_state(rt, "books") == ([], [])
    rt.signal("holder", "done")
    rt.result("holder", timeout=30)
    assert_one_at_a_time(rt, {"holder": "books", "taker": "books"})


def test_a_failure_inside_the_block_releases_the_lock(rt, workers):
    workers.start("A")
    rt.start("locked", "fails", {"lock": "vault", "fail": True, "wait_after": True})
    wait_for(lambda: rt.describe("fails")["status"] == "sleeping", message="fails waits after its block")
    assert lock_state(rt, "vault") == ([], [])
    names = [s["name"] for s in rt.describe("fails")["steps"]]
    assert names.index("unlock:vault") > names.index("boom")
    rt.signal("fails", "done")
    assert rt.result("fails", timeout=30) == {"failed_inside": True}


def test_cancel_inside_the_block_releases_the_lock_to_the_next(rt, workers):
    workers.start("A")
    rt.start("locked", "held", {"lock": "till", "wait_inside": True})
    wait_for(lambda: rt.describe("held")["status"] == "sleeping", message="held waits inside its block")
    rt.start("locked", "next", {"lock": "till"})
    wait_for(lambda: lock_state(rt, "till") == (["held"], ["next"]), message="next waits")
    rt.cancel("held", by="ops")
    assert rt.result("next", timeout=30) == {}
    with pytest.raises(WorkflowFailed) as err:
        rt.result("held", timeout=30)
    assert err.value.status == "cancelled"
    assert lock_state(rt, "till") == ([], [])


def test_a_revoked_lock_refuses_the_effect_inside_the_block(rt, workers, tmp_path):
    """rt.revoke_lock takes the slot away: the next taker runs at once, and the holder's refund
    inside the block is refused in T_dispatch, naming the lock; nothing is sent."""
    with refund_env(tmp_path, 1) as env:
        workers.start("A", env=env.worker_env())
        grant = rt.grant("locked", "refund", max_cents=5000, by="policy")
        case = env.case("lk1")
        rt.start(
            "locked",
            "lk1",
            {
                "lock": "payouts",
                "wait_inside": True,
                "grant": grant,
                "url": env.target_url,
                "payment": case["payment"],
                "amount": 1000,
                "key": "refund:lk1",
            },
        )
        wait_for(lambda: rt.describe("lk1")["status"] == "sleeping", message="lk1 waits inside its block")
        rt.start("locked", "lk2", {"lock": "payouts"})
        with pytest.raises(InvalidInput) as err:
            rt.revoke_lock("lk1", "payouts", by="")
        assert err.value.field == "by"
        assert rt.revoke_lock("lk1", "payouts", by="ops") == {"released": True, "may_still_land": []}
        assert rt.result("lk2", timeout=30) == {}
        rt.signal("lk1", "go")
        out = rt.result("lk1", timeout=30)
        assert out["status"] == "REFUSED:stale_premise", out
        assert env.ledger() == []
        steps = {s["name"]: s for s in rt.describe("lk1")["steps"]}
        assert steps["unlock:payouts"]["output"] == {"key": "payouts", "released": False}
        assert rt.revoke_lock("lk1", "payouts", by="ops") == {"released": False, "may_still_land": []}


def test_revoking_a_waiter_leaves_it_waiting_in_its_place(rt, workers):
    """rt.revoke_lock on a workflow that waits for the lock takes nothing away: released is
    False, it stays queued, and it takes the lock when the holder's block ends."""
    workers.start("A")
    rt.start("locked", "rv-hold", {"lock": "drawer", "wait_inside": True})
    wait_for(lambda: rt.describe("rv-hold")["status"] == "sleeping", message="the holder waits inside")
    rt.start("locked", "rv-wait", {"lock": "drawer"})
    wait_for(lambda: lock_state(rt, "drawer") == (["rv-hold"], ["rv-wait"]), message="rv-wait waits")
    assert rt.revoke_lock("rv-wait", "drawer", by="ops") == {"released": False, "may_still_land": []}
    assert lock_state(rt, "drawer") == (["rv-hold"], ["rv-wait"])
    rt.signal("rv-hold", "go")
    assert rt.result("rv-wait", timeout=30) == {}


def test_bad_lock_input_fails_the_call_naming_the_field(rt, workers):
    """An empty key, a limit of 0, or the workflow's own concurrency key: the call raises
    InvalidInput and nothing is written (here the workflow fails with it)."""
    workers.start("A")
    rt.start("locked", "bad1", {"lock": ""})
    rt.start("locked", "bad2", {"lock": "x", "limit": 0})
    rt.start("locked", "bad3", {"lock": "own"}, concurrency_key="own")
    for wf, field in (("bad1", "key"), ("bad2", "limit"), ("bad3", "key")):
        with pytest.raises(WorkflowFailed) as err:
            rt.result(wf, timeout=30)
        assert err.value.error["type"] == "InvalidInput" and err.value.error.get("field") == field, err.value.error
        assert [s["kind"] for s in rt.describe(wf)["steps"]] == []
    with pytest.raises(InvalidInput) as err:
        rt.revoke_lock("bad3", "own", by="ops")
    assert err.value.field == "key"
