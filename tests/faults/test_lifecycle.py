"""Lifecycle (issue 43) on real worker subprocesses: ``rt.terminate`` and a child's parent close
policy (request_cancel by default, terminate, abandon) when the parent completes, fails, is
cancelled or terminated; a terminated holder's slots; bad input. Workflows: tests.support.flows
``parent`` (its input's "policy") and ``child_ok``, ``waiter``, ``keyed``."""

from __future__ import annotations

import signal

import pytest

from ilr import InvalidInput, WorkflowFailed, WorkflowNotFound
from ilr import _codec as codec
from tests.support.refund_harness import refund_env
from tests.support.waits import wait_for

OUTCOME = {"request_cancel": "cancelled", "terminate": "terminated", "abandon": "sleeping"}
"""A sleeping child's status after its parent ended, by the child's parent close policy."""


def _status(rt, wf_id: str) -> str | None:
    """The workflow's status; None while it does not exist yet."""
    try:
        return rt.describe(wf_id)["status"]
    except WorkflowNotFound:
        return None


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


@pytest.mark.parametrize("policy", ["request_cancel", "terminate", "abandon"])
@pytest.mark.parametrize("parent_end", ["fails", "cancel", "cancel_by_policy", "terminate"])
def test_each_policy_when_the_parent_fails_is_cancelled_or_terminated(rt, workers, policy, parent_end):
    """A sleeping child under each policy, its parent ending each way: the parent's end applies the
    policy, and what the cancel or terminate answered names what it did to the child."""
    workers.start("A")
    wf_id = f"pe-{parent_end}-{policy}"
    child_id = f"{wf_id}/1"
    fails = parent_end == "fails"
    rt.start(
        "parent",
        wf_id,
        {"child": {"seconds": 3600}, "policy": policy, "timeout": 1.0 if fails else None, "fail_on_timeout": fails},
    )
    wait_for(lambda: _status(rt, child_id) == "sleeping", message="the child sleeps")
    if parent_end == "fails":
        assert _ended(rt, wf_id)["error"]["type"] == "ChildTimeout"
    elif parent_end == "terminate":
        done = rt.terminate(wf_id, reason="test", by="ops")
        said = {"request_cancel": "cancel requested", "terminate": "terminated", "abandon": "abandoned"}
        assert done.children == {child_id: said[policy]}
    else:
        children = "tree" if parent_end == "cancel" else "policy"
        answer = rt.cancel(wf_id, by="ops", children=children)
        expected = {
            ("tree", "request_cancel"): "cancel requested",
            ("tree", "abandon"): "abandoned",
            ("policy", "abandon"): "abandoned",
        }.get((children, policy), f"at the parent's end: {policy}")
        assert answer.children == {child_id: expected}
        assert _ended(rt, wf_id)["status"] == "cancelled"
    wait_for(lambda: rt.describe(child_id)["status"] == OUTCOME[policy], message=f"the child is {OUTCOME[policy]}")
    if policy == "abandon":
        assert rt.describe(child_id)["cancel_requested_at"] is None


@pytest.mark.parametrize("policy", ["request_cancel", "terminate"])
def test_a_child_waiting_on_an_approval_has_its_request_withdrawn_when_its_parent_completes(
    rt, workers, tmp_path, policy
):
    workers.start("A")
    with refund_env(tmp_path, tier=1) as env:
        case = env.case("pa")
        child = {"url": env.target_url, "payment": case["payment"], "amount": 700, "key": "refund:pa"}
        rt.start("parent", "pa", {"child_name": "asks_approval", "child": child, "policy": policy, "timeout": 2.0})
        assert rt.result("pa", timeout=30)["timeout"] is True
        wait_for(lambda: rt.describe("pa/1")["status"] == OUTCOME[policy], message=f"the child is {OUTCOME[policy]}")
        (request,) = [r for r in rt.approval_requests(status=None) if r["workflow_id"] == "pa/1"]
        assert request["status"] == "cancelled"
        assert env.ledger(case["payment"]) == []


@pytest.mark.parametrize("via", ["itself", "its parent"])
def test_terminate_names_a_dispatched_send_that_may_still_land_and_its_receipt_says_it_did(rt, workers, tmp_path, via):
    """The worker is paused (SIGSTOP) between T_dispatch and the send; a terminate of the
    workflow, or of its parent (policy terminate), names the effect; the send then lands and the
    fenced-out sender's late result commits the effect (docs/protocol.md §6.4): the workflow
    stays terminated, one refund on the ledger, the effect's record says committed."""
    amount_file = tmp_path / "amount"
    amount_file.write_text("500")
    with refund_env(tmp_path, tier=1) as env:
        grant = rt.grant("agent", "refund", max_cents=1000, by="ops")
        case = env.case("tm", amount_file=str(amount_file), grant_id=grant)
        a = workers.start("A", lease_ttl=30, env=env.worker_env(ILR_STOP_AT="effect_after_dispatch"))
        if via == "itself":
            wf_id, child_id = "tm", "tm"
            rt.start("live_amount", wf_id, case)
        else:
            wf_id, child_id = "tmp", "tmp/1"
            rt.start("parent", wf_id, {"child_name": "live_amount", "child": case, "policy": "terminate"})
        workers.wait_state("A", "T", timeout=30)  # paused between T_dispatch and the send
        done = rt.terminate(wf_id, reason="runaway", by="ops")
        effect_id = codec.effect_id_for({"request_id": f"live:{child_id}"})
        assert done and done.may_still_land == (effect_id,)
        assert done.children == ({} if via == "itself" else {child_id: "terminated"})
        a.send_signal(signal.SIGCONT)
        wait_for(lambda: env.ledger(case["payment"]), timeout=30, message="the authorized send lands")

        def effect_state():
            (effect,) = rt.describe(child_id)["effects"]
            return effect["state"] if effect["state"] != "dispatched" else None

        assert wait_for(effect_state, timeout=30, message="the effect resolved") == "committed"
        assert rt.describe(child_id)["status"] == "terminated"
        assert len(env.ledger(case["payment"])) == 1


def test_a_bad_children_choice_is_refused_naming_the_field(rt):
    rt.start("three_steps", "bc", {})
    with pytest.raises(InvalidInput) as err:
        rt.cancel("bc", by="ops", children="all")
    assert err.value.field == "children"
    assert rt.describe("bc")["cancel_requested_at"] is None


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


@pytest.mark.parametrize("policy", ["request_cancel", "terminate", "abandon"])
def test_a_run_that_continues_as_new_applies_its_childrens_policies(rt, workers, policy):
    """As in Temporal, a run that continues as new closes: its children get their policies."""
    workers.start("A")
    rt.start("parent_continues", "pcn", {"policy": policy})
    wait_for(lambda: _status(rt, "pcn#1") == "sleeping", message="the successor waits")
    wait_for(lambda: _status(rt, "pcn/1") == OUTCOME[policy], message=f"the child is {OUTCOME[policy]}")
    assert rt.describe("pcn/1")["parent_id"] == "pcn"


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
