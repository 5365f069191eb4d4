"""Schedules in-process (issue 44): the API's checks, create-or-update, the tick transaction on
two racing connections, the catch-up window, and each overlap policy against a run that is still
active (no worker runs here, so a started run stays pending: active). The real workers are in
tests/faults/test_schedules.py."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from ilr import InvalidInput
from ilr import _db as db
from ilr._schedules.ticks import tick_in
from tests.support.queries.schedules import (
    ANY_TICKS_BY_SCHEDULED_AT,
    COUNT_TICKS_BY_SCHEDULE_ID,
    DELETE_TICKS_BY_WORKFLOW_ID,
    MIN_SCHEDULED_AT_OF_TICKS_BY_SCHEDULE_ID,
    OUTCOME_REASON_LATE_OF_TICKS_BY_SCHEDULE_ID,
    SCHEDULED_AT_OUTCOME_OPEN_ETC_OF_TICKS_BY_SCHEDULE_ID,
    SCHEDULED_AT_WORKFLOW_ID_STARTED_AT_OF_TICKS_BY_SCHEDULE_ID,
    SET_SCHEDULES_NEXT_FIRE_AT_BY_ID,
    SET_SCHEDULES_NEXT_TICK_AT_NEXT_FIRE_AT_BY_ID,
)
from tests.support.queries.workflows import COUNT_WORKFLOWS_BY_ID, COUNT_WORKFLOWS_BY_ID_SCHED_RACE

BAD = [
    ({"cron": "61 * * * *"}, "cron"),
    ({"cron": "* * *"}, "cron"),
    ({"cron": "* * * * *", "every": 5}, "cron"),
    ({}, "cron"),
    ({"every": 0}, "every"),
    ({"every": -1}, "every"),
    ({"every": 5, "timezone": "Mars/Olympus"}, "timezone"),
    ({"every": 5, "overlap": "sometimes"}, "overlap"),
    ({"every": 5, "jitter": -1}, "jitter"),
    ({"every": 5, "catchup_window": -1}, "catchup_window"),
    ({"every": 5, "start_at": datetime(2026, 1, 2)}, "start_at"),
    ({"every": 5, "start_at": datetime(2026, 1, 2, tzinfo=UTC), "end_at": datetime(2026, 1, 1, tzinfo=UTC)}, "end_at"),
    ({"every": 5, "pause_on_failure": "yes"}, "pause_on_failure"),
    ({"cron": "0 0 31 2 *"}, "cron"),  # February 31st: a valid expression that never fires
    ({"every": 1e20}, "every"),  # past any date: an OverflowError before the bound
    ({"every": 5, "jitter": 1e20}, "jitter"),
    ({"every": 5, "catchup_window": 1e20}, "catchup_window"),
]


@pytest.mark.parametrize(("kw", "field"), BAD)
def test_bad_input_names_the_field_and_writes_nothing(rt, kw, field):
    with pytest.raises(InvalidInput) as err:
        rt.schedule("s1", "sched_note", {}, **kw)
    assert err.value.field == field, err.value
    assert rt.schedules() == []


@pytest.mark.parametrize("sid", ["", "a/b", "a#b", "a:b", "x" * 151])
def test_bad_schedule_ids_are_refused(rt, sid):
    with pytest.raises(InvalidInput) as err:
        rt.schedule(sid, "sched_note", {}, every=5)
    assert err.value.field == "schedule_id"


def test_create_or_update_is_idempotent_and_keeps_the_next_tick_when_the_spec_stays(rt):
    first = rt.schedule("s1", "sched_note", {"a": 1}, every=3600)
    again = rt.schedule("s1", "sched_note", {"a": 2}, every=3600, overlap="allow_all")
    assert again["next_tick_at"] == first["next_tick_at"]
    assert (again["input"], again["overlap"]) == ({"a": 2}, "allow_all")
    moved = rt.schedule("s1", "sched_note", {"a": 2}, cron="0 3 * * *", timezone="Europe/Berlin")
    assert moved["next_tick_at"].astimezone(UTC).hour in (1, 2)  # 03:00 Berlin
    assert [s["id"] for s in rt.schedules()] == ["s1"]
    assert rt.delete_schedule("s1") and not rt.delete_schedule("s1")


def _due(rt, sid, seconds_ago):
    """Move the schedule's next tick ``seconds_ago`` into the past (as if its workers were down)."""
    rt.connection().execute(
        SET_SCHEDULES_NEXT_TICK_AT_NEXT_FIRE_AT_BY_ID,
        (seconds_ago, seconds_ago, sid),
    )


def _tick(dsn):
    with db.connect(dsn) as conn, conn.transaction():
        return tick_in(conn)


def test_two_connections_racing_the_tick_start_each_tick_once(rt, clean_db):
    rt.schedule("race", "sched_note", {}, every=1, overlap="allow_all", catchup_window=3600)
    _due(rt, "race", 30)
    barrier = threading.Barrier(4)

    def racer():
        barrier.wait()
        for _ in range(5):
            _tick(clean_db)

    threads = [threading.Thread(target=racer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    d = rt.describe_schedule("race")
    rows = rt.connection().execute(SCHEDULED_AT_WORKFLOW_ID_STARTED_AT_OF_TICKS_BY_SCHEDULE_ID).fetchall()
    assert len(rows) >= 31 and all(r["workflow_id"] for r in rows)
    gaps = {(b["scheduled_at"] - a["scheduled_at"]).total_seconds() for a, b in zip(rows, rows[1:], strict=False)}
    assert gaps == {1.0}
    assert all(r["started_at"] >= r["scheduled_at"] for r in rows)
    n = rt.connection().execute(COUNT_WORKFLOWS_BY_ID_SCHED_RACE).fetchone()["n"]
    assert n == len(rows)
    assert d["next_tick_at"] > rows[-1]["scheduled_at"]


def test_ticks_older_than_the_catch_up_window_are_missed_with_the_reason(rt, clean_db):
    rt.schedule("cw", "sched_note", {}, every=10, overlap="allow_all", catchup_window=25)
    _due(rt, "cw", 60)
    _tick(clean_db)
    d = rt.describe_schedule("cw")
    rows = rt.connection().execute(OUTCOME_REASON_LATE_OF_TICKS_BY_SCHEDULE_ID).fetchall()
    assert len(rows) == 7  # one per tick from 60 s ago to now
    for r in rows:  # recorded_at is the tick transaction's now(): the clock it judged by
        assert (r["outcome"] == "missed") == (r["late"] > timedelta(seconds=25)), r
    assert len(d["missed"]) >= 4 and len(d["recent"]) >= 2  # lateness 60+x ... x s, x in [0, 10)
    assert all("beyond the catch-up window of 25.000 s" in m["reason"] for m in d["missed"])


def _trigger(rt, sid, overlap=None):
    return rt.trigger_schedule(sid, overlap)


def test_each_overlap_policy_against_an_active_run(rt, clean_db):
    rt.schedule("ov", "sched_note", {}, every=3600)
    first = _trigger(rt, "ov")
    assert first["outcome"] == "started" and first["workflow_id"].startswith("sched:ov:")
    assert _trigger(rt, "ov", "skip")["outcome"] == "skipped"
    assert _trigger(rt, "ov", "buffer_one")["outcome"] == "buffered"
    assert _trigger(rt, "ov", "buffer_one")["outcome"] == "skipped"  # one buffered already
    assert _trigger(rt, "ov", "buffer_all")["outcome"] == "buffered"
    allowed = _trigger(rt, "ov", "allow_all")
    assert allowed["outcome"] == "started"
    d = rt.describe_schedule("ov")
    assert set(d["running"]) == {first["workflow_id"], allowed["workflow_id"]}
    assert len(d["buffered"]) == 2
    cancel = _trigger(rt, "ov", "cancel_other")
    assert cancel["outcome"] == "buffered"
    for wf in (first["workflow_id"], allowed["workflow_id"]):
        assert rt.describe(wf)["cancel_requested_by"] == "$schedule:ov"
    d = rt.describe_schedule("ov")
    assert [b["scheduled_at"] for b in d["buffered"]] == [cancel["scheduled_at"]]  # the older ones dropped
    term = _trigger(rt, "ov", "terminate_other")
    assert term["outcome"] == "started"
    for wf in (first["workflow_id"], allowed["workflow_id"]):
        assert rt.describe(wf)["status"] == "terminated"
    # The buffered tick starts once no run is active: end the last one, and tick.
    rt.terminate(term["workflow_id"], reason="test", by="test")
    rt.connection().execute(SET_SCHEDULES_NEXT_FIRE_AT_BY_ID)
    _tick(clean_db)
    d = rt.describe_schedule("ov")
    assert d["buffered"] == [] and d["running"] == [f"sched:ov:{_iso(cancel['scheduled_at'])}"]


def _iso(t):
    from ilr._schedules.spec import tick_workflow_id

    return tick_workflow_id("x", t).split(":", 2)[2]


def test_pause_resume_and_backfill(rt, clean_db):
    rt.schedule("pb", "sched_note", {}, every=60, overlap="allow_all")
    assert rt.pause_schedule("pb", note="maintenance") and not rt.pause_schedule("pb")
    _due(rt, "pb", 120)
    _tick(clean_db)
    assert rt.describe_schedule("pb")["recent"] == []  # paused: nothing ran
    assert rt.resume_schedule("pb")
    d = rt.describe_schedule("pb")
    assert not d["paused"] and d["next_tick_at"] > datetime.now(UTC) - timedelta(seconds=5)
    end = datetime(2026, 1, 1, 1, tzinfo=UTC)
    out = rt.backfill_schedule("pb", end - timedelta(minutes=5), end)
    assert out["ticks"] == 5 and len(out["started"]) == 5
    again = rt.backfill_schedule("pb", end - timedelta(minutes=5), end)
    assert again == {"ticks": 5, "started": []}  # exactly once per tick
    with pytest.raises(InvalidInput) as err:
        rt.backfill_schedule("pb", end, end - timedelta(minutes=5))
    assert err.value.field == "end"


def test_schedules_declared_in_code_are_synced_by_the_command_and_pruned_when_gone(rt, monkeypatch):
    from django.core.management import call_command

    from ilr import declare_schedule
    from ilr._schedules import declared

    monkeypatch.setattr(declared, "_DECLARED", {})
    with pytest.raises(InvalidInput) as err:
        declare_schedule("bad", "sched_note", cron="not a cron")
    assert err.value.field == "cron" and declared.declared() == {}
    with pytest.raises(InvalidInput) as err:  # a misspelt option: was a TypeError at sync, not at import
        declare_schedule("bad", "sched_note", every=5, catchup_windw=60)
    assert err.value.field == "catchup_windw" and declared.declared() == {}
    declare_schedule("code-a", "sched_note", {"x": 1}, every=600)
    declare_schedule("code-b", "sched_note", cron="0 4 * * *", timezone="Europe/Berlin")
    rt.schedule("api-c", "sched_note", {}, every=60)
    call_command("ilr_schedules", prune=True)
    first = {s["id"]: s for s in rt.schedules()}
    assert {k: v["source"] for k, v in first.items()} == {"api-c": "api", "code-a": "code", "code-b": "code"}
    del declared._DECLARED["code-b"]
    call_command("ilr_schedules")  # without --prune: nothing deleted, code-a's next tick kept
    assert {s["id"] for s in rt.schedules()} == {"api-c", "code-a", "code-b"}
    assert rt.describe_schedule("code-a")["next_tick_at"] == first["code-a"]["next_tick_at"]
    call_command("ilr_schedules", prune=True)
    assert {s["id"] for s in rt.schedules()} == {"api-c", "code-a"}


def test_a_schedule_deleted_and_made_again_leaves_its_old_runs_alone(rt, clean_db):
    """Its tick rows went with the delete; the old runs are not taken for ticks of the new one
    (ScheduleTickOnce), and the new one's ticks start as before."""
    from ilr._invariants import check_all

    rt.schedule("again", "sched_note", {}, every=3600)
    old = rt.trigger_schedule("again")["workflow_id"]
    assert rt.delete_schedule("again")
    rt.schedule("again", "sched_note", {}, every=3600)
    new = rt.trigger_schedule("again")["workflow_id"]
    assert old != new and rt.describe(old)["status"] == "pending"
    with db.connect(clean_db) as conn:
        results = check_all(conn)
    assert all(results[n] == [] for n in ("ScheduleTickOnce", "ScheduleTickNotEarly", "ScheduleOverlapRespected"))


def _prune(dsn, sid):
    """One prune of ``sid``'s tick rows under its row lock, as its tick transaction does at about
    one turn in PRUNE_EVERY (the turn is a hash of the tick; here, every call)."""
    from psycopg.rows import dict_row

    from ilr._queries.schedules import SCHEDULE_LOCK
    from ilr._schedules.ticks import Ticker

    with db.connect(dsn) as conn, conn.transaction():
        row = conn.cursor(row_factory=dict_row).execute(SCHEDULE_LOCK, (sid,)).fetchone()
        Ticker(conn, row).prune(row["next_tick_at"])


def test_tick_rows_past_the_retention_are_pruned_and_never_recorded_again(rt, clean_db, settings):
    """ILR_SCHEDULE_TICK_RETENTION: the tick rows older than it, than the catch-up window and than
    the next tick are deleted a batch at a time (never an open one); ticks_pruned_through marks the
    newest; a pruned tick is never recorded or started again (a backfill over it is refused, the
    tick transaction's record refuses it), and ScheduleTickOnce tells a pruned tick's run from one
    no tick row started."""
    from ilr._invariants import check_all
    from ilr._schedules.ticks import PRUNE_BATCH

    # Every row kept while the history is built: a tick transaction prunes at about one turn in
    # PRUNE_EVERY (a hash of the tick, so of the clock), and one that pruned here would leave the
    # two prunes below nothing to count (CI saw it: 2 rows pruned, not 101).
    settings.ILR_SCHEDULE_TICK_RETENTION = None
    rt.schedule("pr", "sched_note", {}, every=1, overlap="skip", catchup_window=30)
    _due(rt, "pr", 300)
    _tick(clean_db)  # 100 missed rows, one for the rest of the gap, then the window: 1 started, skipped
    conn = rt.connection()
    tick = conn.execute(MIN_SCHEDULED_AT_OF_TICKS_BY_SCHEDULE_ID).fetchone()
    old = tick["t"] + timedelta(seconds=50)  # 250 s ago: a missed tick, started now by a backfill
    started = rt.backfill_schedule("pr", old, old + timedelta(seconds=1), overlap="allow_all")["started"]
    assert len(started) == 1
    rt.terminate(started[0], reason="ended", by="test")
    _due(rt, "pr", 0)
    _tick(clean_db)  # sees it ended: its tick row is closed
    settings.ILR_SCHEDULE_TICK_RETENTION = 60
    before = conn.execute(COUNT_TICKS_BY_SCHEDULE_ID).fetchone()["n"]
    _prune(clean_db, "pr")
    _prune(clean_db, "pr")
    rows = conn.execute(SCHEDULED_AT_OUTCOME_OPEN_ETC_OF_TICKS_BY_SCHEDULE_ID).fetchall()
    mark = rt.describe_schedule("pr")["ticks_pruned_through"]
    assert before - len(rows) == PRUNE_BATCH + 1  # the 100 listed missed ticks and the gap's row
    assert mark is not None and all(r["scheduled_at"] > mark for r in rows)
    assert all(r["age"] <= timedelta(seconds=61) for r in rows), rows[0]
    assert any(r["outcome"] == "started" and r["open"] for r in rows)  # the window's run, still active
    # The backfilled run's tick row is gone; its workflow stays, and is not started again.
    with pytest.raises(InvalidInput) as err:
        rt.backfill_schedule("pr", old - timedelta(seconds=5), old + timedelta(seconds=5), overlap="allow_all")
    assert err.value.field == "start" and "pruned" in err.value.rule
    with db.connect(clean_db) as c2, c2.transaction():
        from psycopg.rows import dict_row

        from ilr._queries.schedules import SCHEDULE_LOCK
        from ilr._schedules.ticks import Ticker

        ticker = Ticker(c2, c2.cursor(row_factory=dict_row).execute(SCHEDULE_LOCK, ("pr",)).fetchone())
        assert ticker.act(old, "backfill", "allow_all") is None  # the tick transaction's own guard
        assert not ticker.record(mark, "tick", "skip", "skipped", "again")
    assert conn.execute(COUNT_WORKFLOWS_BY_ID, (started[0],)).fetchone()["n"] == 1
    assert not conn.execute(ANY_TICKS_BY_SCHEDULED_AT, (mark,)).fetchall()
    after = rt.backfill_schedule("pr", mark + timedelta(seconds=1), mark + timedelta(seconds=3), overlap="allow_all")
    assert len(after["started"]) == 2  # after the mark: never recorded, started now
    assert check_all(conn, names=["ScheduleTickOnce"]) == {"ScheduleTickOnce": []}
    # Not vacuous: a started tick's row deleted after the mark is a run no tick row started.
    conn.execute(DELETE_TICKS_BY_WORKFLOW_ID, (after["started"][0],))
    assert [v["workflow"] for v in check_all(conn, names=["ScheduleTickOnce"])["ScheduleTickOnce"]] == [
        after["started"][0]
    ]
    settings.ILR_SCHEDULE_TICK_RETENTION = None
    before = conn.execute(COUNT_TICKS_BY_SCHEDULE_ID).fetchone()["n"]
    _prune(clean_db, "pr")  # None keeps every row
    assert conn.execute(COUNT_TICKS_BY_SCHEDULE_ID).fetchone()["n"] == before


def test_a_buffered_tick_older_than_the_pruned_ones_still_starts(rt, clean_db, settings):
    """A run longer than the retention: the skipped ticks behind the buffered one are pruned (the
    mark passes it), and the buffered tick, whose row is never pruned, starts once the run ends."""
    settings.ILR_SCHEDULE_TICK_RETENTION = 1
    rt.schedule("bb", "sched_note", {}, every=1, overlap="buffer_one", catchup_window=1000)
    _due(rt, "bb", 100)
    _tick(clean_db)  # -100 started (its run stays pending), -99 buffered, the rest skipped
    rt.schedule("bb", "sched_note", {}, every=1, overlap="buffer_one", catchup_window=30)  # same spec: same next tick
    _prune(clean_db, "bb")
    d = rt.describe_schedule("bb")
    (buffered,) = d["buffered"]
    assert d["ticks_pruned_through"] > buffered["scheduled_at"]  # skipped ticks after it were pruned
    rt.terminate(d["recent"][0]["workflow_id"], reason="ended", by="test")
    _due(rt, "bb", 0)
    _tick(clean_db)
    started = {r["scheduled_at"] for r in rt.describe_schedule("bb")["recent"]}
    assert buffered["scheduled_at"] in started
