"""Lifecycle (issue 43) on real worker subprocesses: ``rt.terminate`` and a child's parent close
policy (request_cancel by default, terminate, abandon) when the parent completes, fails, is
cancelled or terminated; a terminated holder's slots; bad input. Workflows: tests.support.flows
``parent`` (its input's "policy") and ``child_ok``, ``waiter``, ``keyed``."""

from __future__ import annotations

import pytest

from ilr import InvalidInput, WorkflowFailed
from tests.support.waits import wait_for


def _ended(rt, wf_id: str) -> dict:
    """The workflow's status and error once it ended."""
    with pytest.raises(WorkflowFailed) as err:
        rt.result(wf_id, timeout=30)
    return {"status": err.value.status, "error": err.value.error}


@pytest.mark.parametrize(
    ("policy", "child_status"),
    [("request_cancel", "cancelled"), ("terminate", "terminated"), ("abandon", "sleeping")],
)
def test_each_policy_when_the_parent_completes(rt, workers, policy, child_status):
    """The parent stops waiting on a sleeping child (timeout) and completes; its end applies the
    child's policy in the same transaction."""
    workers.start("A")
    rt.start("parent", "pc", {"child": {"seconds": 3600}, "timeout": 0.5, "policy": policy})
    assert rt.result("pc", timeout=30)["timeout"] is True
    wait_for(lambda: rt.describe("pc/1")["status"] == child_status, message=f"the child is {child_status}")
    child = rt.describe("pc/1")
    assert child["parent_close_policy"] == policy
    if policy == "terminate":
        assert child["error"]["type"] == "Terminated" and child["error"]["by"] == "$parent:pc"
    if policy == "request_cancel":
        assert child["cancel_requested_by"] == "$parent:pc"


def test_the_policy_reaches_the_current_run_of_a_childs_chain(rt, workers):
    """A child that continued as new (counter) is terminated at its current run when the parent
    ends (its wait timed out)."""
    workers.start("A")
    rt.start(
        "parent",
        "pf",
        {
            "child_name": "counter",
            "child": {"until": 5, "seconds": 3600, "sleep_from": 1},
            "policy": "terminate",
            "timeout": 1.5,
        },
    )
    rt.result("pf", timeout=30)  # the timeout is caught by the workflow: it completes
    wait_for(lambda: rt.describe("pf/1#1")["status"] == "terminated", message="the child's current run is terminated")
    assert rt.describe("pf/1")["status"] == "continued"


def test_terminate_ends_a_sleeping_workflow_at_once_with_no_compensation(rt, workers):
    workers.start("A")
    rt.start("waiter", "t1", {})
    wait_for(lambda: rt.describe("t1")["status"] == "sleeping", message="t1 waits on its signal")
    done = rt.terminate("t1", reason="stuck customer", by="ops")
    assert done and done.terminated and done.may_still_land == () and done.children == {}
    ended = _ended(rt, "t1")
    assert ended["status"] == "terminated"
    assert ended["error"] == {
        "type": "Terminated",
        "message": "terminated by ops: stuck customer",
        "reason": "stuck customer",
        "by": "ops",
    }
    assert not rt.terminate("t1", reason="again", by="ops")  # ended already: nothing to do
    with pytest.raises(InvalidInput) as err:
        rt.signal("t1", "approve", {})
    assert err.value.field == "workflow_id"


def test_terminate_of_a_parent_applies_its_childrens_policies(rt, workers):
    workers.start("A")
    rt.start("parent", "tp", {"child": {"seconds": 3600}})
    wait_for(lambda: rt.describe("tp")["status"] == "sleeping" and rt.describe("tp")["children"], message="tp waits")
    done = rt.terminate("tp", reason="wrong batch", by="ops")
    assert done.children == {"tp/1": "cancel requested"}
    assert _ended(rt, "tp/1")["status"] == "cancelled"  # its cancel ran (compensation would have)


def test_terminate_of_a_running_holder_frees_its_key_and_fences_its_worker(rt, workers):
    """The holder sits in a slow step; terminate ends it at once, its key goes to the next, and
    the worker's next fenced write finds the run gone."""
    workers.start("A", env={"ILR_LOG_LEVEL": "INFO"})
    rt.start("keyed", "h1", {"account": "acct:t", "seconds": 2.0})
    rt.start("keyed", "h2", {"account": "acct:t"})
    wait_for(lambda: rt.describe("h1")["status"] == "running", message="h1 runs its step")
    assert rt.terminate("h1", reason="runaway", by="ops")
    assert rt.result("h2", timeout=30) == {"account": "acct:t", "n": 0}
    assert _ended(rt, "h1")["status"] == "terminated"
    wait_for(lambda: "fenced out of h1" in workers.log("A"), message="A is fenced out of h1")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"reason": "", "by": "ops"}, "reason"),
        ({"reason": "x", "by": ""}, "by"),
        ({"reason": 3, "by": "ops"}, "reason"),
    ],
)
def test_bad_terminate_input_is_refused_naming_the_field(rt, kwargs, field):
    rt.start("three_steps", "bt", {})
    with pytest.raises(InvalidInput) as err:
        rt.terminate("bt", **kwargs)
    assert err.value.field == field
    assert rt.describe("bt")["status"] == "pending"


def test_a_bad_parent_close_policy_fails_the_parent_naming_the_field(rt, workers):
    workers.start("A")
    rt.start("parent", "bp", {"policy": "orphan"})
    ended = _ended(rt, "bp")
    assert ended["status"] == "failed" and ended["error"]["field"] == "parent_close_policy"
    assert rt.describe("bp")["children"] == []
