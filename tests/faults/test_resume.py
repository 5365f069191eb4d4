"""Resuming a stuck workflow driven stuck for real (a swallowed Suspend, a crash loop of real
SIGKILLs), resumed through the API, and completed once the code is fixed or the fault removed.
The command, the admin action and the refusals are in tests/integration/test_resume.py."""

from __future__ import annotations

from tests.support.db import invocations, status
from tests.support.waits import wait_for


def test_swallowed_suspend_resumed_under_fixed_code_completes_keeping_its_steps(rt, workers):
    """A workflow whose sleep sits in a bare except is marked stuck ("Suspend swallowed"); after
    rt.resume it runs under a worker with the fixed code: the recorded step is replayed (its body
    ran once), the sleep and the rest run, and the workflow completes."""
    workers.start("broken")
    rt.start("swallow_unless_fixed", "sw", {})
    wait_for(lambda: status(rt, "sw") == "stuck", message="the swallowed Suspend marks it stuck")
    stuck = rt.describe("sw")
    assert stuck["error"]["type"] == "SuspendSwallowed"
    assert [s["name"] for s in stuck["steps"]] == ["before"]
    assert invocations(rt, "sw", "after") == 1
    workers.kill("broken")

    out = rt.resume("sw", by="ops")
    assert out["workflow_id"] == "sw" and out["status"] == "pending" and out["steps"] == 1
    assert out["error"]["type"] == "SuspendSwallowed" and out["resumed_by"] == "ops"
    row = rt.describe("sw")
    assert (row["status"], row["error"], row["takeovers"], row["epoch"]) == ("pending", None, 0, stuck["epoch"])
    assert row["resumed_by"] == "ops" and row["resumed_at"] == out["resumed_at"]

    workers.start("fixed", env={"ILR_TEST_FIXED": "1"})
    assert rt.result("sw", timeout=30) == "fixed"
    assert invocations(rt, "sw", "before") == 1  # kept: replayed from its row, never run again
    # "after" never recorded in the broken run (its body ran once after the swallowed Suspend,
    # and its record was refused): a step without a row runs again, exactly once more here.
    assert invocations(rt, "sw", "after") == 2
    assert [s["name"] for s in rt.describe("sw")["steps"]] == ["before", "sleep", "after"]


def test_crash_loop_resumed_after_the_fault_is_removed_completes(rt, workers):
    """Every claim is SIGKILLed before it records step1 until the crash-loop guard marks the
    workflow stuck; resumed, with the fault gone, it completes, and the guard starts over."""
    rt.start("three_steps", "loop", {})
    for i in range(6):
        proc = workers.start(
            f"k{i}", lease_ttl=1, args=("--max-takeovers", "1"), env={"ILR_KILL_AT": "step_before_record"}
        )
        wait_for(
            lambda proc=proc: proc.poll() is not None or status(rt, "loop") == "stuck",
            timeout=20,
            message="the worker dies at the kill point, or the guard marks the workflow stuck",
        )
        if status(rt, "loop") == "stuck":
            break
    d = rt.describe("loop")
    assert d["status"] == "stuck" and d["error"]["type"] == "CrashLoop", d
    assert invocations(rt, "loop", "step1") == 2  # the first claim and one takeover
    workers.kill_all()  # the worker that marked it stuck still has the kill point armed

    out = rt.resume("loop", by="ops")
    assert out["error"]["type"] == "CrashLoop" and out["steps"] == 0
    assert rt.describe("loop")["takeovers"] == 0
    workers.start("healthy", lease_ttl=1, args=("--max-takeovers", "1"))
    assert rt.result("loop", timeout=30) == {"counts": [3, 1, 1]}  # step1 ran again: it never recorded
