"""History limits (issue 43, docs/protocol.md §5.7) on real worker subprocesses: the figures a
run sees (``ctx.history_length``, ``ctx.history_bytes``) and the same figures after a replay;
the warning (``ctx.continue_as_new_suggested``, ``rt.describe``, the admin page); the limit in
steps and in bytes (the workflow fails naming the limit and the figures, even when its code
catches the error); the opt-in continue-as-new; and a worker SIGKILLed while it replays a
20,000-step history in pages. Workflows: tests.support.flows_history."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

import tests.support.flows_history  # noqa: F401 - registers the workflows in this process
from tests.support.queries.claims import OWNER_PREV_STATUS_OF_CLAIMS_BY_WORKFLOW_ID
from tests.support.review import client_for, text
from tests.support.waits import failure_of, wait_for

FLOWS = ("--import", "tests.support.flows_history")


def _worker(workers, name="A", **env):
    return workers.start(name, args=FLOWS, env={k: str(v) for k, v in env.items()})


def test_the_figures_grow_with_each_step_and_replay_the_same(rt, workers):
    """Each step sees the rows before it; the half run after a sleep (a replay of the first
    half) sees the same figures; bytes are each output's JSON text."""
    _worker(workers)
    rt.start("history_steps", "h-fig", {"steps": 8, "sleep_after": 4})
    out = rt.result("h-fig", timeout=60)
    # Steps 0-3 see 0-3 rows; the sleep's row is the fifth; steps 4-7 see 5-8.
    assert out["seen"] == [0, 1, 2, 3, 5, 6, 7, 8]
    assert out["length"] == 9 and out["suggested"] is False and out["first_suggested"] is None
    step_bytes = sum(len(f"[{n}, {i}]") for i, n in enumerate(out["seen"]))
    sleep_row = rt.describe("h-fig")["steps"][4]
    assert sleep_row["kind"] == "sleep"
    assert out["bytes"] == step_bytes + len(json.dumps(sleep_row["output"]))
    assert rt.describe("h-fig")["history"]["length"] == 9
    assert rt.describe("h-fig")["history"]["bytes"] == out["bytes"]


def test_past_the_warning_continue_as_new_is_suggested_and_said(rt, workers, settings):
    settings.ILR_HISTORY_WARN_STEPS = 5
    _worker(workers, ILR_HISTORY_WARN_STEPS=5)
    rt.start("history_steps", "h-warn", {"steps": 8, "sleep_after": 3})
    out = rt.result("h-warn", timeout=60)
    assert out["suggested"] is True and out["first_suggested"] == 6  # 6 rows: past 5
    history = rt.describe("h-warn")["history"]
    assert history["continue_as_new_suggested"] is True
    assert history["warning"] == "history of 9 step rows, past ILR_HISTORY_WARN_STEPS 5: continue as new"
    c = client_for(User.objects.create_superuser("root", password="pw"))
    body = text(c.get(reverse("admin:ilr_workflow_change", args=["h-warn"])))
    assert "Warning: history of 9 step rows, past ILR_HISTORY_WARN_STEPS 5" in body


def test_past_the_byte_warning_too(rt, workers, settings):
    settings.ILR_HISTORY_WARN_BYTES = 1000
    _worker(workers, ILR_HISTORY_WARN_BYTES=1000)
    rt.start("history_steps", "h-warnb", {"steps": 6, "size": 300})
    out = rt.result("h-warnb", timeout=60)
    assert out["suggested"] is True and out["first_suggested"] == 4 and out["bytes"] > 1000
    assert "past ILR_HISTORY_WARN_BYTES 1,000" in rt.describe("h-warnb")["history"]["warning"]
    assert rt.describe("h-warnb")["history"]["length"] == 6


@pytest.mark.parametrize("catch", [False, True])
def test_past_the_step_limit_the_workflow_fails_naming_it(rt, workers, catch):
    """The call that would record row 11 fails the workflow, after a replay too (the sleep);
    code that catches the error does not escape it."""
    _worker(workers, ILR_HISTORY_LIMIT_STEPS=10)
    rt.start("history_steps", "h-lim", {"steps": 20, "sleep_after": 6, "catch": catch})
    error = failure_of(rt, "h-lim", timeout=60)
    assert error["type"] == "HistoryLimitExceeded"
    assert error["message"] == "history of 11 steps exceeds ILR_HISTORY_LIMIT_STEPS 10"
    assert (error["setting"], error["limit"], error["figure"], error["history_length"]) == (
        "ILR_HISTORY_LIMIT_STEPS",
        10,
        11,
        10,
    )
    assert len(rt.describe("h-lim")["steps"]) == 10


def test_past_the_byte_limit_the_workflow_fails_at_its_next_call(rt, workers):
    _worker(workers, ILR_HISTORY_LIMIT_BYTES=1000)
    rt.start("history_steps", "h-limb", {"steps": 20, "size": 300})
    error = failure_of(rt, "h-limb", timeout=60)
    rows = rt.describe("h-limb")["steps"]
    assert len(rows) == 4  # 3 rows of about 320 bytes are under 1,000; the fourth is past it
    assert error["type"] == "HistoryLimitExceeded" and error["setting"] == "ILR_HISTORY_LIMIT_BYTES"
    assert error["message"] == f"history of {error['figure']:,} bytes exceeds ILR_HISTORY_LIMIT_BYTES 1,000"
    assert error["figure"] == rt.describe("h-limb")["history"]["bytes"] > 1000


def test_a_workflow_that_opted_in_continues_as_new_with_its_input(rt, workers):
    _worker(workers, ILR_HISTORY_LIMIT_STEPS=10)
    given = {"steps": 20, "sleep_after": 6, "then": 3}
    rt.start("history_rollover", "h-roll", given)
    out = rt.result("h-roll", timeout=60)
    assert out == {"run": "h-roll#1", "input": given, "length": 3}
    first = rt.describe("h-roll")
    assert first["status"] == "continued" and len(first["steps"]) == 10
    assert rt.describe("h-roll#1")["input"] == given


@pytest.mark.slow
def test_a_worker_killed_while_replaying_20000_steps_is_taken_over(rt, workers):
    """C records 20,000 steps and the workflow waits on a signal; the signal wakes it, A claims
    it and is SIGKILLed at its 5th page of replay (about seq 2,500); B takes over when A's lease
    lapses, replays the whole history in pages and completes with the right sum."""
    n = 20_000
    workers.start("C", args=FLOWS, concurrency=1)
    rt.start("history_sum", "h-big", {"steps": n + 2, "wait_after": n})
    status = wait_for(
        lambda: (s := rt.describe("h-big")["status"]) in ("sleeping", "completed", "failed", "stuck") and s,
        timeout=900,
        interval=1,
        message="20,000 steps recorded",
    )
    assert status == "sleeping", rt.describe("h-big")["error"]
    workers.kill("C")
    _worker(workers, "A", ILR_KILL_AT="replay_page@5")
    rt.signal("h-big", "go", {})
    workers.wait_state("A", "X", timeout=120)
    assert workers.procs["A"].returncode == -9
    assert rt.describe("h-big")["owner"] == "A"  # A held the claim when it died
    _worker(workers, "B")
    out = rt.result("h-big", timeout=300)
    # The history: 20,000 steps, the signal's row, 2 steps.
    assert out == {"total": sum(range(n + 2)), "length": n + 3}
    owners = rt.connection().execute(OWNER_PREV_STATUS_OF_CLAIMS_BY_WORKFLOW_ID).fetchall()
    # C's claim, A's after the signal, and B's: the takeover of A's lapsed lease.
    assert [(r["owner"], r["prev_status"]) for r in owners] == [("C", "pending"), ("A", "sleeping"), ("B", "running")]
