"""Concurrency keys on the real thing (issue 42): worker subprocesses racing one key's
workflows, SIGKILL and SIGSTOP of the holder's worker, cancels of holders and of queued
workflows, continue-as-new, children, and a database restart. The step bodies log their start
and end ("enter", "leave"); one key's bodies must never overlap. At teardown the whole invariants
registry holds (SlotMutex, NoRunWithoutSlot, SlotReleasedAtEnd, NoStrandedWaiter, SlotFifo
among them)."""

from __future__ import annotations

import os
import signal

import pytest

from ilr import WorkflowFailed
from tests.support.db import embedded_cluster_or_skip, invocations
from tests.support.overlap import assert_one_at_a_time
from tests.support.queries.claims import OWNER_OF_CLAIMS_BY_WORKFLOW_ID_H1
from tests.support.refund_harness import refund_env, wait_for_request
from tests.support.waits import wait_for


@pytest.mark.parametrize("n_workers", [2, 4])
def test_workers_racing_100_workflows_on_10_keys_never_overlap_and_go_in_order(rt, workers, n_workers):
    """2 and 4 workers (4 slots each) and 100 workflows over 10 keys (limit 1): the bodies of
    one key never overlap, and each key's workflows run in the order they were started (FIFO
    within one priority)."""
    for i in range(n_workers):
        workers.start(f"w{i}", concurrency=4, poll=0.2)
    key_of = {}
    for i in range(100):
        wf = f"k{i:03d}"
        # Ten starts in a row share a key: without the key they would run side by side.
        key_of[wf] = f"acct:{i // 10}"
        rt.start("keyed", wf, {"account": key_of[wf], "seconds": 0.01})
    for wf in key_of:
        assert rt.result(wf, timeout=180)["account"] == key_of[wf]
    order = assert_one_at_a_time(rt, key_of)
    for key, entered in order.items():
        assert entered == sorted(entered), f"{key} ran out of start order: {entered}"
    assert sum(len(v) for v in order.values()) == 100


def test_sigkill_of_the_holders_worker_keeps_the_slot_through_the_takeover(rt, workers):
    """The holder's worker is SIGKILLed after a step body ran, before its row was recorded; the
    waiter stays queued through the lease's lapse and the takeover, and starts only after the
    holder ended on the second worker."""
    a = workers.start("A", lease_ttl=2, env={"ILR_KILL_AT": "step_before_record"})
    rt.start("keyed", "h1", {"account": "acct:1"})
    a.wait(20)
    assert a.returncode == -signal.SIGKILL
    rt.start("keyed", "h2", {"account": "acct:1"})
    queued = rt.describe("h2")
    assert queued["waiting"] == {"kind": "slot", "key": "acct:1"}
    assert queued["concurrency"] == [
        {"key": "acct:1", "limit": 1, "state": "queued", "slot_no": None, "position": 1, "holders": ["h1"]}
    ]
    workers.start("B", lease_ttl=2)
    rt.result("h2", timeout=30)
    assert_one_at_a_time(rt, {"h1": "acct:1", "h2": "acct:1"})
    owners = [r["owner"] for r in rt.connection().execute(OWNER_OF_CLAIMS_BY_WORKFLOW_ID_H1).fetchall()]
    assert owners == ["A", "B"]  # the takeover kept the slot: no other holder came in between
    assert invocations(rt, "h1", "enter") == 3  # first ran twice (A, then B), then second


def test_sigstop_of_the_holders_worker_past_its_lease_admits_no_one_early(rt, workers):
    """The holder's worker is SIGSTOPped past its lease; a second worker takes the holder over
    and finishes it, and only then does the waiter run. The stopped worker, continued, is fenced
    and releases nothing."""
    a = workers.start("A", lease_ttl=2, env={"ILR_STOP_AT": "step_before_record", "ILR_LOG_LEVEL": "INFO"})
    rt.start("keyed", "s1", {"account": "acct:2"})
    workers.wait_state("A", "T")
    rt.start("keyed", "s2", {"account": "acct:2"})
    workers.start("B", lease_ttl=2)
    rt.result("s1", timeout=30)
    rt.result("s2", timeout=30)
    os.kill(a.pid, signal.SIGCONT)
    wait_for(lambda: "fenced out of s1" in workers.log("A"), message="A is fenced out of s1")
    assert_one_at_a_time(rt, {"s1": "acct:2", "s2": "acct:2"})
    assert rt.concurrency("acct:2") == {"key": "acct:2", "holders": [], "waiting": []}


def test_a_holder_waiting_for_an_approval_holds_no_worker_and_its_cancel_admits_the_next(rt, workers, tmp_path):
    """A workflow holds its key while it waits on an approval request for minutes, with no
    worker slot; a second start of the key queues; cancelling the holder (its compensation and
    its pending request withdrawn) lets the queued one run."""
    with refund_env(tmp_path, tier=1) as env:
        workers.start("A", concurrency=1)
        case = env.case("ap1")
        rt.start(
            "asks_approval",
            "ap1",
            {"url": env.target_url, "payment": case["payment"], "amount": 500, "key": "refund:ap1", "timeout": 600},
            concurrency_key="acct:3",
        )
        request = wait_for_request(rt, "ap1")
        rt.start("keyed", "ap2", {"account": "acct:3"})
        rt.start("keyed", "free", {"account": "acct:other"})
        # The one worker slot is free while ap1 waits: another key's workflow runs meanwhile.
        assert rt.result("free", timeout=30) == {"account": "acct:other", "n": 0}
        assert rt.describe("ap2")["status"] == "pending"
        assert invocations(rt, "ap2") == 0
        assert rt.cancel("ap1", by="ops")
        assert rt.result("ap2", timeout=30) == {"account": "acct:3", "n": 0}
        with pytest.raises(WorkflowFailed) as err:
            rt.result("ap1", timeout=30)
        assert err.value.status == "cancelled"
        assert rt.approval_request(request["id"])["status"] == "cancelled"


def test_a_burst_of_cancel_running_starts_runs_only_the_newest(rt, workers):
    """A holder waits on a signal; five cancel_running starts of its key come before its cancel
    is delivered (its worker is SIGKILLed while it waits: the slot is the workflow's). The newest
    runs, the four before it end cancelled without running (each found the first holder still
    holding and queued behind the others: all five ran in turn)."""
    workers.start("A", poll=0.2)
    rt.start("keyed", "hold", {"account": "acct:9", "wait_signal": True})
    wait_for(lambda: (rt.describe("hold")["waiting"] or {}).get("kind") == "signal", timeout=30)
    workers.kill("A")
    for i in range(5):
        rt.start("keyed", f"new{i}", {"account": "acct:9"}, on_conflict="cancel_running")
    workers.start("B", poll=0.2)
    workers.start("C", poll=0.2)
    assert rt.result("new4", timeout=30) == {"account": "acct:9", "n": 0}
    for wf in ("hold", "new0", "new1", "new2", "new3"):
        with pytest.raises(WorkflowFailed) as err:
            rt.result(wf, timeout=30)
        assert err.value.status == "cancelled", wf
    assert [invocations(rt, f"new{i}", "enter") for i in range(4)] == [0, 0, 0, 0]
    assert_one_at_a_time(rt, {wf: "acct:9" for wf in ("hold", "new4")})


def test_a_cancelled_queued_workflow_ends_at_once_without_running_and_wakes_its_parent(rt, workers):
    """A queued start that is cancelled ends cancelled in the cancel's transaction: it never
    runs, not even compensation. A queued child's cancel wakes the parent waiting on it."""
    workers.start("A")
    rt.start("keyed", "q1", {"account": "acct:4", "wait_signal": True})
    wait_for(lambda: rt.describe("q1")["status"] == "sleeping", message="q1 holds the key and sleeps")
    rt.start("keyed", "q2", {"account": "acct:4"})
    rt.start("keyed_parent", "par", {"child": {"account": "acct:4"}})
    wait_for(lambda: rt.describe("par")["children"], message="the parent started its child")
    child = rt.describe("par")["children"][0]
    wait_for(lambda: rt.describe(child)["waiting"] == {"kind": "slot", "key": "acct:4"}, message="the child queues")
    assert [w["workflow_id"] for w in rt.concurrency("acct:4")["waiting"]] == ["q2", child]
    rt.cancel("q2", by="ops")
    rt.cancel(child, by="ops")
    for wf in ("q2", child):
        d = rt.describe(wf)
        assert d["status"] == "cancelled" and d["concurrency"] == []
        assert "cancelled while queued" in d["error"]["message"]
        assert invocations(rt, wf) == 0
    with pytest.raises(WorkflowFailed) as err:
        rt.result("par", timeout=30)  # the parent woke: its wait_child raised ChildFailed
    assert err.value.status == "failed" and err.value.error["type"] == "ChildFailed"
    assert rt.concurrency("acct:4")["holders"][0]["workflow_id"] == "q1"
    rt.signal("q1", "go")
    assert rt.result("q1", timeout=30)["account"] == "acct:4"
    assert rt.concurrency("acct:4") == {"key": "acct:4", "holders": [], "waiting": []}


def test_the_slot_is_carried_through_sleeps_and_continue_as_new(rt, workers):
    """A chain that sleeps and continues as new twice holds its key from its first step to its
    last run's end; the queued start runs after the whole chain."""
    workers.start("A", concurrency=4)
    rt.start("keyed", "chain", {"account": "acct:5", "sleep": 0.3, "continue_until": 2})
    wait_for(lambda: invocations(rt, "chain") > 0, message="the chain started")
    rt.start("keyed", "after", {"account": "acct:5"})
    assert rt.result("chain", timeout=30)["n"] == 2
    rt.result("after", timeout=30)
    assert_one_at_a_time(rt, {"chain": "acct:5", "after": "acct:5"})


def test_a_database_crash_with_holders_and_waiters_loses_no_slot(rt, workers):
    """The database crashes (stop -m immediate) and starts with one holder sleeping on a signal
    and two workflows queued behind it: afterwards each runs in turn, one at a time."""
    cluster = embedded_cluster_or_skip()
    workers.start("A", lease_ttl=5, poll=0.5)
    rt.start("keyed", "d1", {"account": "acct:6", "wait_signal": True})
    wait_for(lambda: rt.describe("d1")["status"] == "sleeping", message="d1 sleeps on its signal")
    rt.start("keyed", "d2", {"account": "acct:6"})
    rt.start("keyed", "d3", {"account": "acct:6"})
    rt.close()
    from django.db import connections

    connections.close_all()
    cluster.restart_immediate()  # a real crash: no checkpoint, WAL replay on start
    assert [w["workflow_id"] for w in rt.concurrency("acct:6")["waiting"]] == ["d2", "d3"]
    rt.signal("d1", "go")
    for wf in ("d1", "d2", "d3"):
        rt.result(wf, timeout=60)
    order = assert_one_at_a_time(rt, {"d1": "acct:6", "d2": "acct:6", "d3": "acct:6"})
    assert order["acct:6"] == ["d1", "d2", "d3"]


def test_a_stuck_holder_keeps_its_key_until_it_is_resumed_and_ends(rt, workers):
    """A holder that gets stuck (a swallowed Suspend) keeps its key: the next start queues
    behind it. Resumed on fixed code, it ends, and the queued one runs."""
    workers.start("A")
    rt.start("swallow_unless_fixed", "stuck1", {"seconds": 0.2}, concurrency_key="acct:7")
    wait_for(lambda: rt.describe("stuck1")["status"] == "stuck", message="stuck1 is stuck")
    rt.start("keyed", "next1", {"account": "acct:7"})
    assert [h["workflow_id"] for h in rt.concurrency("acct:7")["holders"]] == ["stuck1"]
    assert rt.describe("next1")["concurrency"][0]["state"] == "queued"
    workers.kill("A")
    workers.start("B", env={"ILR_TEST_FIXED": "1"})
    rt.resume("stuck1", by="ops")
    assert rt.result("stuck1", timeout=30) == "fixed"
    assert rt.result("next1", timeout=30) == {"account": "acct:7", "n": 0}
    assert rt.concurrency("acct:7") == {"key": "acct:7", "holders": [], "waiting": []}


def test_a_child_asking_for_its_parents_own_key_is_refused_not_deadlocked(rt, workers):
    """A parent holding acct:8 starts a keyed child for acct:8: the child would wait for the key
    its parent holds while the parent waits on it. The start is refused, naming the field, and
    the parent fails with it; nothing waits forever."""
    workers.start("A")
    rt.start("keyed_parent", "kp", {"child": {"account": "acct:8"}}, concurrency_key="acct:8")
    with pytest.raises(WorkflowFailed) as err:
        rt.result("kp", timeout=30)
    assert err.value.error["type"] == "InvalidInput" and err.value.error["field"] == "concurrency_key"
    assert rt.describe("kp")["children"] == []
