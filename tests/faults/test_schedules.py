"""Schedules on the real thing (issue 44): worker subprocesses racing every tick, a worker paused
(SIGSTOP) across ticks, the overlap policies against runs longer than the interval, pause on
failure. Every check is on the database clock: a tick's workflow row is inserted no earlier than
its scheduled time, and each tick has exactly one workflow."""

from __future__ import annotations

import signal
import time
from datetime import timedelta

from tests.support.waits import wait_for

RACE_SECONDS = 20


def ticks(rt, sid):
    return (
        rt.connection()
        .execute(
            "select t.scheduled_at, t.outcome, t.reason, t.workflow_id, t.started_at, w.created_at "
            "from ilr.schedule_ticks t left join ilr.workflows w on w.id = t.workflow_id "
            "where t.schedule_id = %s order by t.scheduled_at",
            (sid,),
        )
        .fetchall()
    )


def runs_of(rt, sid):
    return (
        rt.connection()
        .execute(
            "select id, status, result, created_at from ilr.workflows where id like %s order by id", (f"sched:{sid}:%",)
        )
        .fetchall()
    )


def test_two_workers_racing_a_one_second_schedule_start_each_tick_exactly_once(rt, workers):
    """Two workers tick a 1 s schedule for 20 s: every tick from the first to the last has exactly
    one workflow, none inserted before its tick on the database clock, each reading its own
    ``ctx.scheduled_time``; both workers started some."""
    workers.start("A", poll=0.1)
    workers.start("B", poll=0.1)
    rt.schedule("race", "sched_note", {}, every=1, overlap="allow_all")
    time.sleep(RACE_SECONDS)  # the run's length, not an assertion: the checks below wait on conditions
    rt.pause_schedule("race")
    rows = ticks(rt, "race")
    assert len(rows) >= RACE_SECONDS - 3, rows
    assert all(r["outcome"] == "started" for r in rows), [r for r in rows if r["outcome"] != "started"]
    gaps = {r2["scheduled_at"] - r1["scheduled_at"] for r1, r2 in zip(rows, rows[1:], strict=False)}
    assert gaps == {timedelta(seconds=1)}  # no tick skipped, none twice
    assert all(r["created_at"] >= r["scheduled_at"] for r in rows)  # never before its time
    assert len(runs_of(rt, "race")) == len(rows)
    for r in rows:
        out = rt.result(r["workflow_id"], timeout=30)
        assert out["scheduled_time"] == r["scheduled_at"].isoformat()
    owners = (
        rt.connection()
        .execute("select distinct owner from ilr.claims where workflow_id like 'sched:race:%'")
        .fetchall()
    )
    assert {o["owner"] for o in owners} == {"A", "B"}
    late = [(r["created_at"] - r["scheduled_at"]).total_seconds() for r in rows]
    assert max(late) < 1.0, late


def test_a_paused_worker_catches_up_within_the_window_and_records_the_missed_ticks(rt, workers):
    """The only worker is SIGSTOPped across 8 ticks of a 1 s schedule with a 3 s catch-up window:
    continued, it records the ticks older than 3 s as missed (with the reason) and runs the rest."""
    a = workers.start("A", poll=0.1)
    rt.schedule("cw", "sched_note", {}, every=1, overlap="allow_all", catchup_window=3)
    wait_for(lambda: len(ticks(rt, "cw")) >= 2, message="two ticks before the pause")
    a.send_signal(signal.SIGSTOP)
    workers.wait_state("A", "T")
    stopped = rt.connection().execute("select now() as n").fetchone()["n"]
    time.sleep(8)  # ticks fall due while nobody ticks
    a.send_signal(signal.SIGCONT)
    wait_for(lambda: [r for r in ticks(rt, "cw") if r["scheduled_at"] > stopped + timedelta(seconds=9)], timeout=20)
    rt.pause_schedule("cw")
    gap = [r for r in ticks(rt, "cw") if stopped < r["scheduled_at"] <= stopped + timedelta(seconds=8)]
    missed = [r for r in gap if r["outcome"] == "missed"]
    assert len(missed) >= 3, gap
    assert all("beyond the catch-up window of 3.000 s" in r["reason"] for r in missed)
    assert any(r["outcome"] == "started" for r in gap)  # the last ticks of the gap were within the window
    described = rt.describe_schedule("cw")["missed"]
    assert {m["scheduled_at"] for m in missed} <= {m["scheduled_at"] for m in described}
