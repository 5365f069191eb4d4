"""Schedules on the real thing (issue 44): worker subprocesses racing every tick, a worker paused
(SIGSTOP) across ticks, the overlap policies against runs longer than the interval, pause on
failure. Every check is on the database clock: a tick's workflow row is inserted no earlier than
its scheduled time, and each tick has exactly one workflow."""

from __future__ import annotations

import signal
import time
from datetime import datetime, timedelta

import pytest

from ilr._invariants import check_all
from ilr._schedules.spec import OVERLAPS
from tests.support.db import embedded_cluster_or_skip
from tests.support.queries.claims import DISTINCT_OWNER_OF_CLAIMS_BY_WORKFLOW_ID
from tests.support.queries.schedules import (
    SCHEDULED_AT_OUTCOME_REASON_ETC_OF_TICKS_BY_SCHEDULE_ID,
    SCHEDULED_AT_STARTED_AT_ID_ETC_OF_TICKS_BY_SCHEDULE_ID,
)
from tests.support.queries.workflows import ID_STATUS_RESULT_ETC_OF_WORKFLOWS_BY_ID
from tests.support.waits import wait_for

RACE_SECONDS = 60
"""The race's length: ticks after the first (issue 44: "a 1 s schedule for a minute")."""

SCHEDULE_INVARIANTS = ("ScheduleTickOnce", "ScheduleTickNotEarly", "ScheduleOverlapRespected")
"""What ``ilr_check`` verifies of schedules (docs/protocol.md §11)."""


def ticks(rt, sid):
    return (
        rt.connection()
        .execute(
            SCHEDULED_AT_OUTCOME_REASON_ETC_OF_TICKS_BY_SCHEDULE_ID,
            (sid,),
        )
        .fetchall()
    )


def runs_of(rt, sid):
    return rt.connection().execute(ID_STATUS_RESULT_ETC_OF_WORKFLOWS_BY_ID, (f"sched:{sid}:%",)).fetchall()


def test_two_workers_racing_a_one_second_schedule_start_each_tick_exactly_once(rt, workers):
    """Two workers tick a 1 s schedule for a minute (issue 44): every tick from the first to the
    61st has exactly one workflow and none was inserted before its tick on the database clock
    (the gaps here, and ilr_check's schedule invariants over the database), each reads its own
    ``ctx.scheduled_time``, and both workers started some."""
    workers.start("A", poll=0.1)
    workers.start("B", poll=0.1)
    rt.schedule("race", "sched_note", {}, every=1, overlap="allow_all")
    first = wait_for(lambda: [r["scheduled_at"] for r in ticks(rt, "race")][:1], timeout=10, message="a first tick")[0]
    last = first + timedelta(seconds=RACE_SECONDS)
    wait_for(
        lambda: ticks(rt, "race")[-1]["scheduled_at"] >= last,
        timeout=RACE_SECONDS + 15,
        interval=0.5,
        message=f"the tick at {last}",
    )
    rt.pause_schedule("race")
    rows = [r for r in ticks(rt, "race") if r["scheduled_at"] <= last]
    assert len(rows) == RACE_SECONDS + 1, rows
    assert all(r["outcome"] == "started" for r in rows), [r for r in rows if r["outcome"] != "started"]
    gaps = {r2["scheduled_at"] - r1["scheduled_at"] for r1, r2 in zip(rows, rows[1:], strict=False)}
    assert gaps == {timedelta(seconds=1)}  # no tick skipped, none twice
    assert all(r["created_at"] >= r["scheduled_at"] for r in rows)  # never before its time
    assert len(runs_of(rt, "race")) == len(ticks(rt, "race"))  # one workflow per tick row, no other
    held = check_all(rt.connection(), names=SCHEDULE_INVARIANTS)
    assert held == {name: [] for name in SCHEDULE_INVARIANTS}, held
    for r in rows:
        out = rt.result(r["workflow_id"], timeout=30)
        assert datetime.fromisoformat(out["scheduled_time"]) == r["scheduled_at"]
        assert out["scheduled_time"].endswith("+00:00")  # UTC, whatever the session's zone
    owners = rt.connection().execute(DISTINCT_OWNER_OF_CLAIMS_BY_WORKFLOW_ID).fetchall()
    assert {o["owner"] for o in owners} == {"A", "B"}
    late = sorted((r["created_at"] - r["scheduled_at"]).total_seconds() for r in rows)
    assert late[len(late) // 2] < 1.0, late  # the median: the bound itself is bench_schedules' (p99)


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


def started_runs(rt, sid):
    """The started ticks' workflows in tick order: started_at (the tick's), id, status, created_at,
    ended (updated_at once ended)."""
    return (
        rt.connection()
        .execute(
            SCHEDULED_AT_STARTED_AT_ID_ETC_OF_TICKS_BY_SCHEDULE_ID,
            (sid,),
        )
        .fetchall()
    )


@pytest.mark.parametrize("overlap", OVERLAPS)
def test_each_overlap_policy_against_runs_longer_than_the_interval(rt, workers, overlap):
    """A 1 s schedule whose runs last 2.5 s, for about 6 s, on two workers; then paused and
    drained. skip, buffer_one, buffer_all: runs never overlap (each starts after the previous
    ended); buffer_one never holds two; cancel_other cancels and terminate_other terminates the
    run a tick found active; allow_all overlaps them."""
    workers.start("A", poll=0.1)
    workers.start("B", poll=0.1)
    rt.schedule("ov", "sched_slow", {"seconds": 2.5}, every=1, overlap=overlap, catchup_window=600)
    wait_for(lambda: len(ticks(rt, "ov")) >= 6, timeout=30, message="six ticks")
    rt.pause_schedule("ov")  # a paused schedule starts nothing more, buffered ticks included
    runs = started_runs(rt, "ov")
    rows = ticks(rt, "ov")
    outcomes = [r["outcome"] for r in rows]
    if overlap == "allow_all":
        assert set(outcomes) == {"started"}
        assert any(b["created_at"] < a["ended"] for a, b in zip(runs, runs[1:], strict=False) if a["ended"])
        return
    for a, b in zip(runs, runs[1:], strict=False):
        if overlap == "terminate_other":
            assert rt.describe(a["id"])["status"] == "terminated" or a["status"] == "completed"
        else:  # the next run began only after the previous one ended
            assert a["status"] not in ("pending", "running", "sleeping"), (a, b)
            # started_at is clock_timestamp() after the tick transaction saw the end; created_at is
            # that transaction's now(), which may precede the end's own transaction time.
            assert b["started_at"] >= a["ended"], (a, b)
    if overlap == "skip":
        assert "skipped" in outcomes and "buffered" not in outcomes
        assert all("overlap skip" in r["reason"] for r in rows if r["outcome"] == "skipped")
    elif overlap == "buffer_one":
        assert "skipped" in outcomes and outcomes.count("buffered") <= 1
        assert all("already buffered" in r["reason"] for r in rows if r["outcome"] == "skipped")
    elif overlap == "buffer_all":
        assert "skipped" not in outcomes and "buffered" in outcomes
    elif overlap == "cancel_other":
        cancelled = [r for r in runs if r["cancel_requested_by"] == "$schedule:ov"]
        assert cancelled and all(wait_for(lambda r=r: rt.describe(r["id"])["status"] == "cancelled") for r in cancelled)
    elif overlap == "terminate_other":
        assert set(outcomes) == {"started"}
        assert sum(rt.describe(r["id"])["status"] == "terminated" for r in runs) >= 3


def test_pause_on_failure_pauses_at_the_next_tick_and_names_the_failed_run(rt, workers):
    workers.start("A", poll=0.1)
    rt.schedule("pf", "sched_fail", {}, every=1, overlap="allow_all", pause_on_failure=True)
    d = wait_for(lambda: (d := rt.describe_schedule("pf"))["paused"] and d, timeout=20, message="paused")
    assert d["note"].startswith("paused on failure: sched:pf:") and d["note"].endswith("ended failed")
    n = len(ticks(rt, "pf"))
    assert n >= 1
    rt.resume_schedule("pf")
    assert not rt.describe_schedule("pf")["paused"]


def test_continue_as_new_keeps_the_scheduled_time(rt, workers):
    workers.start("A", poll=0.1)
    rt.schedule("can", "sched_note", {"continue_until": 2}, every=3600)
    t = rt.trigger_schedule("can")
    out = rt.result(t["workflow_id"], timeout=30)
    assert out["n"] == 2 and datetime.fromisoformat(out["scheduled_time"]) == t["scheduled_at"]


@pytest.mark.parametrize("window", [2, 60])
def test_a_database_outage_across_ticks_is_caught_up_within_the_window(rt, workers, window):
    """The database stops (fast) for about 5 s under a worker ticking a 1 s schedule. Once it is
    back, the ticks of the outage older than the catch-up window are recorded missed with the
    reason (window 2 s), or all run (window 60 s); either way each tick has exactly one record and
    at most one workflow, and ticking goes on."""
    cluster = embedded_cluster_or_skip()
    workers.start("A", poll=0.1)
    rt.schedule("out", "sched_note", {}, every=1, overlap="allow_all", catchup_window=window)
    wait_for(lambda: len(ticks(rt, "out")) >= 2, message="two ticks before the outage")
    rt.close()
    from django.db import connections

    connections.close_all()
    cluster.stop()
    time.sleep(5)  # the outage's length: ticks fall due while the database is down
    cluster.start()
    back = rt.connection().execute("select now() as n").fetchone()["n"]
    wait_for(lambda: [r for r in ticks(rt, "out") if r["scheduled_at"] > back + timedelta(seconds=2)], timeout=30)
    rt.pause_schedule("out")
    rows = ticks(rt, "out")
    gaps = {b["scheduled_at"] - a["scheduled_at"] for a, b in zip(rows, rows[1:], strict=False)}
    assert gaps == {timedelta(seconds=1)}, rows  # every tick recorded once, none skipped over
    missed = [r for r in rows if r["outcome"] == "missed"]
    if window == 2:
        assert len(missed) >= 2 and all("beyond the catch-up window of 2.000 s" in r["reason"] for r in missed)
    else:
        assert missed == []
    assert len(runs_of(rt, "out")) == len([r for r in rows if r["outcome"] == "started"])


def test_a_worker_with_no_schedules_ticks_none_and_another_does(rt, workers):
    workers.start("A", poll=0.1, args=("--no-schedules",))
    rt.schedule("ns", "sched_note", {}, every=1, overlap="allow_all", catchup_window=600)
    time.sleep(2.5)  # two ticks fall due: the window in which nothing may happen
    assert ticks(rt, "ns") == []
    workers.start("B", poll=0.1)
    rows = wait_for(lambda: len(ticks(rt, "ns")) >= 3 and ticks(rt, "ns"), message="B ticks, A runs")
    assert rows[0]["outcome"] == "started"  # the ticks due before B came were within the window
    rt.pause_schedule("ns")
