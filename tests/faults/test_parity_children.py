"""Temporal parity (issue 5; docs/temporal.md, docs/protocol.md §4, §5.3): child workflows (a
child's completion or failure reaches its parent, cancelling the parent cancels its running
children) and continue-as-new (the result and signals follow the chain), against real
PostgreSQL and real ``manage.py ilr_worker`` subprocesses. The rest of the parity tests are in
tests/faults/test_parity.py and tests/faults/test_parity_fork.py.
"""

from __future__ import annotations

import pytest

from ilr import InvalidInput, WorkflowFailed
from tests.support.db import invocations, statuses
from tests.support.waits import wait_for


def test_child_completion_wakes_the_parent(rt, workers):
    workers.start("w1")
    rt.start("parent", "p1", {"child": {"seconds": 1.5, "x": 21}})
    waiting = wait_for(
        lambda: (
            (d := rt.describe("p1"))["status"] == "sleeping"
            and d["waiting"]
            and d["waiting"].get("kind") == "child"
            and d
        ),
        message="p1 waiting on its child",
    )
    assert waiting["waiting"] == {"seq": 2, "kind": "child", "name": "wait:p1/1", "child": "p1/1", "until": None}
    assert waiting["available_at"].year == 9999  # only the child's terminal write can wake it
    assert rt.result("p1", timeout=30) == {"child": "p1/1", "result": {"doubled": 42, "runs": 1}}
    d = rt.describe("p1")
    assert d["children"] == ["p1/1"]
    assert [(s["kind"], s["name"], s["fingerprint"]) for s in d["steps"]] == [
        ("child", "start:child_ok", None),
        ("child", "wait:p1/1", None),
    ]
    child = rt.describe("p1/1")
    assert child["parent_id"] == "p1" and child["status"] == "completed" and child["version"] == "1"

    # A timeout: the wait gives up (recorded); an "abandon" child runs on after its parent ends.
    rt.start("parent", "p2", {"child": {"seconds": 3600}, "timeout": 1, "policy": "abandon"})
    assert rt.result("p2", timeout=30) == {"child": "p2/1", "timeout": True, "waited_on": "p2/1"}
    assert rt.describe("p2/1")["status"] == "sleeping" and rt.describe("p2/1")["parent_close_policy"] == "abandon"

    # A fork of the parent after the child started waits on the original's child.
    rt.fork("p1", 2, "p1-fork")
    assert rt.result("p1-fork", timeout=30) == {"child": "p1/1", "result": {"doubled": 42, "runs": 1}}
    assert rt.describe("p1-fork")["children"] == []


def test_child_failure_reaches_the_parent(rt, workers):
    workers.start("w1")
    rt.start("parent", "pf-caught", {"child": {"fail": True}, "catch": True})
    rt.start("parent", "pf", {"child": {"fail": True, "seconds": 0.5}})
    assert rt.result("pf-caught", timeout=30) == {
        "child": "pf-caught/1",
        "failed": "failed",
        "error_type": "StepFailed",
    }
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pf", timeout=30)
    assert err.value.status == "failed"
    assert err.value.error["type"] == "ChildFailed" and err.value.error["child"] == "pf/1"
    assert err.value.error["child_status"] == "failed"
    assert err.value.error["child_error"]["type"] == "StepFailed"
    assert rt.describe("pf/1")["status"] == "failed"
    assert invocations(rt, "pf/1", "boom") == 1


def test_cancelling_the_parent_cancels_its_running_child(rt, workers):
    workers.start("w1")
    rt.start("parent", "pc", {"child": {"seconds": 3600}})
    wait_for(
        lambda: (
            statuses(rt, ["pc", "pc/1"]) == {"pc": "sleeping", "pc/1": "sleeping"}
            and (rt.describe("pc")["waiting"] or {}).get("kind") == "child"
        ),
        message="parent and child asleep",
    )
    assert rt.cancel("pc", by="ops").requested is True
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pc", timeout=30)
    assert err.value.status == "cancelled"
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pc/1", timeout=30)
    assert err.value.status == "cancelled"
    steps = rt.describe("pc/1")["steps"]
    assert [(s["kind"], s["error"]["type"]) for s in steps] == [("sleep", "Cancelled")]
    assert invocations(rt, "pc/1", "work") == 0
    # Who asked is recorded with the request, on the child as well; a second cancel changes nothing.
    assert rt.cancel("pc", by="someone-else").requested is False
    assert [rt.describe(w)["cancel_requested_by"] for w in ("pc", "pc/1")] == ["ops", "ops"]


def test_continue_as_new_three_times_and_result_follows_the_chain(rt, workers):
    workers.start("w1")
    rt.start("counter", "can", {"until": 3})
    assert rt.result("can", timeout=30) == {"n": 3, "id": "can#3"}
    chain = ["can", "can#1", "can#2", "can#3"]
    for i, wf_id in enumerate(chain):
        d = rt.describe(wf_id)
        assert d["continued_from"] == (chain[i - 1] if i else None)
        assert d["input"] == ({"until": 3, "n": i} if i else {"until": 3})
        assert invocations(rt, wf_id, "count") == 1
        if i < 3:
            assert d["status"] == "continued" and d["result"] == {"continued_as": chain[i + 1]}
    assert rt.describe("can#3")["status"] == "completed"
    with pytest.raises(InvalidInput):
        rt.signal("can", "ping", {})  # the chain ended: its current run takes no signal

    # A parent waiting on a child that continues-as-new follows the chain to its last run.
    rt.start("parent", "pcan", {"child_name": "counter", "child": {"until": 2, "seconds": 0.5}})
    assert rt.result("pcan", timeout=30) == {"child": "pcan/1", "result": {"n": 2, "id": "pcan/1#2"}}
    assert rt.describe("pcan/1#2")["parent_id"] == "pcan"


def test_cancel_and_signal_reach_the_current_run_of_a_chain(rt, workers):
    workers.start("w1")
    rt.start("counter", "cc", {"until": 2, "seconds": 3600, "sleep_from": 1})
    wait_for(
        lambda: statuses(rt, ["cc", "cc#1"]) == {"cc": "continued", "cc#1": "sleeping"},
        message="cc continued, cc#1 asleep",
    )
    rt.signal("cc", "ping", {"n": 1})
    assert [s["workflow_id"] for s in rt.describe("cc#1")["signals"]] == ["cc#1"]
    assert rt.cancel("cc", by="ops").requested is True
    with pytest.raises(WorkflowFailed) as err:
        rt.result("cc", timeout=30)
    assert err.value.status == "cancelled" and err.value.workflow_id == "cc#1"
    assert statuses(rt, ["cc", "cc#1"]) == {"cc": "continued", "cc#1": "cancelled"}


def test_signals_not_yet_consumed_move_to_the_successor_in_order(rt, workers):
    """Three credits arrive before the first run consumes any. Each run takes one and continues
    as new: the two it did not take move to its successor, in order, once each, and the chain
    sums all three (the second stayed on the old run, and its successor waited forever)."""
    rt.start("credit_server", "credits", {"expect": 3})
    for amount in (1, 10, 100):
        rt.signal("credits", "credit", {"amount": amount})
    workers.start("A")
    assert rt.result("credits", timeout=30) == {"total": 111, "runs": 3}
    first, second = rt.describe("credits"), rt.describe("credits#1")
    assert [s["payload"] for s in first["signals"]] == [{"amount": 1}]
    assert [s["payload"] for s in second["signals"]] == [{"amount": 10}]
    assert [s["payload"] for s in rt.describe("credits#2")["signals"]] == [{"amount": 100}]
