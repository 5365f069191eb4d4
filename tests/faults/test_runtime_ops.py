"""Operations (issue 2): the crash-loop guard, SIGTERM drain, transaction bodies inside a
Django transaction, a decision recorded once across a SIGKILL."""

from __future__ import annotations

import signal
import time

import pytest

from ilr import WorkflowFailed, cancel_in, signal_in
from tests.support.db import invocations
from tests.support.waits import wait_for


def test_crash_loop_guard_marks_stuck(rt, workers):
    """Every claim dies at step_before_record; after max_takeovers the claim marks it stuck."""
    rt.start("three_steps", "loop", {})
    for i in range(6):
        proc = workers.start(
            f"w{i}", lease_ttl=1, args=("--max-takeovers", "2"), env={"ILR_KILL_AT": "step_before_record"}
        )
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            if rt.describe("loop")["status"] == "stuck":
                break
            time.sleep(0.05)
        if rt.describe("loop")["status"] == "stuck":
            break
    d = rt.describe("loop")
    assert d["status"] == "stuck", d
    assert d["error"]["type"] == "CrashLoop" and "max_takeovers 2" in d["error"]["message"]
    assert d["steps"] == []
    assert invocations(rt, "loop", "step1") == 3  # the first claim and two takeovers, then no more


def test_sigterm_finishes_in_flight_work_and_exits_0(rt, workers):
    w = workers.start("w1", poll=0.05)
    rt.start("retrier", "drain", {"fail_times": 0, "max_attempts": 1})
    rt.result("drain", timeout=20)
    w.send_signal(signal.SIGTERM)
    assert w.wait(20) == 0


def test_signal_in_and_cancel_in_inside_a_django_transaction(rt, workers, django_db_blocker):
    from django.db import connection, transaction

    workers.start("w1")
    rt.start("waiter", "dj", {})
    rt.start("compensating", "dj2", {})
    wait_for(
        lambda: rt.describe("dj")["status"] == "sleeping" and rt.describe("dj2")["status"] == "sleeping",
        message="both sleeping",
    )
    with django_db_blocker.unblock():
        # A rolled-back caller transaction leaves no signal and wakes nothing.
        with pytest.raises(RuntimeError):
            with transaction.atomic():
                connection.ensure_connection()
                signal_in(connection.connection, "dj", "approve", {"n": 0})
                raise RuntimeError("caller rolls back")
        assert rt.describe("dj")["signals"] == []
        with transaction.atomic():
            connection.ensure_connection()
            signal_in(connection.connection, "dj", "approve", {"n": 1}, sender="django")
            assert cancel_in(connection.connection, "dj2", by="django").requested is True
        connection.close()
    assert rt.result("dj", timeout=20) == {"payload": {"n": 1}}
    with pytest.raises(WorkflowFailed) as err:
        rt.result("dj2", timeout=20)
    assert err.value.status == "cancelled"
