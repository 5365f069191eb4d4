"""Runtime core against real PostgreSQL and real worker subprocesses (issue 2)."""

from __future__ import annotations

import pytest

from ilr import WorkflowFailed
from tests.support.db import invocations
from tests.support.queries.effects import COUNT_EFFECTS
from tests.support.waits import failure_of, wait_for


def test_three_steps_complete_and_replay_costs_no_write(rt, workers):
    workers.start("w1")
    rt.start("three_steps", "wf-1", {})
    assert rt.result("wf-1", timeout=20) == {"counts": [1, 1, 1]}
    d = rt.describe("wf-1")
    assert [s["name"] for s in d["steps"]] == ["step1", "step2", "step3"]
    assert d["status"] == "completed"
    assert invocations(rt, "wf-1") == 3


def test_start_is_idempotent_on_id(rt, workers):
    assert rt.start("three_steps", "same", {}) == "same"
    assert rt.start("three_steps", "same", {}) == "same"
    assert len(rt.list(name="three_steps")) == 1


def test_retries_follow_backoff_then_step_failed(rt, workers):
    workers.start("w1")
    rt.start("retrier", "r-ok", {"fail_times": 2, "initial": 0.3, "max_attempts": 3})
    rt.start("retrier", "r-fail", {"fail_times": 5, "initial": 0.3, "max_attempts": 3})
    assert rt.result("r-ok", timeout=20) == 3
    with pytest.raises(WorkflowFailed) as err:
        rt.result("r-fail", timeout=20)
    assert err.value.status == "failed"
    assert err.value.error["type"] == "StepFailed"
    assert invocations(rt, "r-fail") == 3  # max_attempts, no more
    # Backoff is durable: gaps between attempts are >= initial * backoff**(n-1) in DB time.
    rows = (
        rt.connection()
        .execute(
            "select extract(epoch from at) as t from public.test_invocations where workflow_id = 'r-fail' order by id"
        )
        .fetchall()
    )
    gaps = [float(b["t"] - a["t"]) for a, b in zip(rows, rows[1:])]
    assert gaps[0] >= 0.3 and gaps[1] >= 0.6, gaps
    step = rt.describe("r-fail")["steps"][0]
    assert step["error"]["attempts"] == 3 and step["error"]["type"] == "Flaky"


def test_cancel_during_sleep_runs_compensation(rt, workers):
    workers.start("w1")
    rt.start("compensating", "c1", {})
    wait_for(lambda: rt.describe("c1")["status"] == "sleeping", message="c1 sleeping")
    assert rt.cancel("c1", by="test").requested is True
    with pytest.raises(WorkflowFailed) as err:
        rt.result("c1", timeout=20)
    assert err.value.status == "cancelled"
    assert invocations(rt, "c1", "release") == 1
    steps = rt.describe("c1")["steps"]
    assert [s["name"] for s in steps] == ["reserve", "sleep", "release"]
    assert steps[1]["error"]["type"] == "Cancelled"
    assert rt.cancel("c1").requested is False  # already ended


def test_signal_wakes_waiter_and_timeout_returns_none(rt, workers):
    workers.start("w1")
    rt.start("waiter", "s1", {})
    rt.start("waiter", "s2", {"timeout": 1})
    wait_for(lambda: rt.describe("s1")["status"] == "sleeping", message="s1 sleeping")
    assert rt.describe("s1")["available_at"].year == 9999  # infinity reads back
    rt.signal("s1", "approve", {"ok": True})
    assert rt.result("s1", timeout=10) == {"payload": {"ok": True}}
    assert rt.result("s2", timeout=10) == {"payload": None}


def test_swallowed_suspend_marks_stuck(rt, workers):
    workers.start("w1")
    rt.start("swallower", "sw", {})
    with pytest.raises(WorkflowFailed) as err:
        rt.result("sw", timeout=20)
    assert err.value.status == "stuck"
    assert "Suspend swallowed" in err.value.error["message"]


@pytest.mark.parametrize(
    "bad, field",
    [
        ("decision", "decision.seq"),
        ("payload_size", "payload"),
        ("premises_size", "premises"),
        ("amount", "payload.amount"),
    ],
)
def test_an_effects_bad_argument_fails_the_workflow_naming_it_and_writes_nothing(rt, workers, bad, field):
    # The payload, premises and decision are sealed into the journal, and the decision's
    # fields are encoded before T_dispatch's fence is read (issue 9): each is checked (plain
    # JSON, at most MAX_JSON_BYTES; the amount a bigint of cents) before any transaction, so
    # the error names it whatever state the effect row is in.
    workers.start("w1")
    rt.start("effect_bad_input", "ebi", {"bad": bad})
    error = failure_of(rt, "ebi")
    assert error["type"] == "InvalidInput" and error["field"] == field, error
    assert rt.connection().execute(COUNT_EFFECTS).fetchone()["n"] == 0


def test_bad_step_output_fails_workflow_naming_field(rt, workers):
    workers.start("w1")
    rt.start("bad_output", "bo", {})
    with pytest.raises(WorkflowFailed) as err:
        rt.result("bo", timeout=20)
    assert err.value.status == "failed"
    assert "output of step 'nan'" in err.value.error["message"]
    assert rt.describe("bo")["steps"] == []
