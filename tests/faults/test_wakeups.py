"""Wakeups by LISTEN/NOTIFY, polling as the fallback, and the worker's heartbeat figure (issue 9).

Every worker here polls every 60 seconds, so a workflow that finishes within a few seconds was
woken by a notification (or by the listener's reconnect), never by the poll.
"""

from __future__ import annotations

import re
import signal
import time

from tests.support.waits import wait_for

SLOW_POLL = 60.0


def _ready(rt, worker_id: str, timeout: float = 30.0) -> None:
    """Wait until the worker's LISTEN connection is open (its application_name ends in -listen)."""
    wait_for(
        lambda: (
            rt.connection()
            .execute(
                "select count(*) as n from pg_stat_activity where application_name = %s and query ilike 'listen%%'",
                (f"ilr-worker-{worker_id}-listen",),
            )
            .fetchone()["n"]
            == 1
        ),
        timeout=timeout,
    )


def test_a_start_wakes_an_idle_worker_by_notification(rt, workers):
    workers.start("w1", poll=SLOW_POLL)
    _ready(rt, "w1")
    time.sleep(0.5)  # the claim loop is now inside its 60 s wait
    t = time.monotonic()
    rt.start("three_steps", "n1", {})
    assert rt.result("n1", timeout=10) == {"counts": [1, 1, 1]}
    assert time.monotonic() - t < 5


def test_a_signal_wakes_a_sleeping_workflow_by_notification(rt, workers):
    workers.start("w1", poll=SLOW_POLL)
    _ready(rt, "w1")
    rt.start("waiter", "s1", {})
    wait_for(lambda: rt.describe("s1")["status"] == "sleeping", timeout=10)
    time.sleep(0.5)
    t = time.monotonic()
    rt.signal("s1", "approve", {"x": 1})
    assert rt.result("s1", timeout=10) == {"payload": {"x": 1}}
    assert time.monotonic() - t < 5


def test_a_lost_notification_does_not_lose_the_wakeup(rt, workers):
    """The listener's connection dies; a workflow started meanwhile is announced to nobody. The
    listener reconnects within a second and claims at once, long before the 60 s poll."""
    workers.start("w1", poll=SLOW_POLL)
    _ready(rt, "w1")
    time.sleep(0.5)
    conn = rt.connection()
    killed = conn.execute(
        "select pg_terminate_backend(pid) as ok from pg_stat_activity where application_name = 'ilr-worker-w1-listen'"
    ).fetchall()
    assert killed and all(r["ok"] for r in killed)
    t = time.monotonic()
    rt.start("three_steps", "lost1", {})
    assert rt.result("lost1", timeout=15) == {"counts": [1, 1, 1]}
    assert time.monotonic() - t < 10


def test_the_worker_reports_its_heartbeats_on_exit(rt, workers):
    proc = workers.start("w1", lease_ttl=0.6, poll=0.05)
    rt.start("sleeper", "hb1", {"seconds": 0})  # warm-up: the worker is up
    rt.result("hb1", timeout=20)
    rt.start("slow", "hb2", {"seconds": 1.5})
    rt.result("hb2", timeout=20)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    line = re.search(r"heartbeat: (\d+) beats, worst gap ([0-9.]+) s \(schedule ([0-9.]+) s\)", workers.log("w1"))
    assert line, workers.log("w1")
    beats, gap, schedule = int(line[1]), float(line[2]), float(line[3])
    assert beats >= 3 and schedule == 0.2
    assert schedule <= gap < 1.0


def test_a_cancel_that_lands_while_the_workflow_runs_is_delivered_at_its_next_wait(rt, workers, tmp_path):
    """The cancel commits while the run executes plain code after its claim; its next call
    suspends (a wait forever). The suspend's fence sees the cancel the run has not seen and
    releases the row due now, so the next claim delivers the Cancelled, instead of the row
    sleeping forever with the cancel pending (it did before: NoLostWakeup for cancels)."""
    workers.start("A")
    go = tmp_path / "go"
    rt.start("busy_then_wait", "cw", {"path": str(go)})
    wait_for(lambda: rt.describe("cw")["status"] == "running", message="cw runs its plain code")
    assert rt.cancel("cw", by="ops")
    go.write_text("")
    wait_for(lambda: rt.describe("cw")["status"] == "cancelled", timeout=20, message="cw is cancelled")
