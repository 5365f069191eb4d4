"""A schedule's ticks (ilr._schedules.spec), no database: cron in a zone across both 2026 European
daylight-saving transitions, intervals from their anchor, bounds, jitter, the tick's workflow id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ilr._schedules.spec import check_spec, tick_workflow_id

BERLIN = "Europe/Berlin"


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def day_of(cron, start, end, zone=BERLIN):
    spec = check_spec(cron, None, zone, 0, None, None)
    return [t.isoformat() for t in spec.ticks(start, end, 100)]


def test_spring_forward_a_missing_local_time_fires_once_at_the_shifted_time():
    """2026-03-29, 02:00 CET becomes 03:00 CEST: 02:30 does not exist that night; it fires at
    03:00 CEST (01:00 UTC), once; the days around keep 02:30 local."""
    assert day_of("30 2 * * *", utc(2026, 3, 27, 12), utc(2026, 3, 30, 12)) == [
        "2026-03-28T01:30:00+00:00",  # 02:30 CET
        "2026-03-29T01:00:00+00:00",  # 03:00 CEST: the shifted time
        "2026-03-30T00:30:00+00:00",  # 02:30 CEST
    ]


def test_spring_forward_an_hourly_cron_skips_the_hour_that_does_not_exist():
    got = day_of("0 * * * *", utc(2026, 3, 28, 23, 30), utc(2026, 3, 29, 2, 30))
    assert got == ["2026-03-29T00:00:00+00:00", "2026-03-29T01:00:00+00:00", "2026-03-29T02:00:00+00:00"]
    # 01:00 CET, 03:00 CEST, 04:00 CEST: one tick per real hour, none twice


def test_fall_back_a_repeated_local_time_fires_once_at_its_first_occurrence():
    """2026-10-25, 03:00 CEST becomes 02:00 CET: 02:30 happens twice; a daily 02:30 fires at the
    first (00:30 UTC) only."""
    assert day_of("30 2 * * *", utc(2026, 10, 24, 12), utc(2026, 10, 26, 12)) == [
        "2026-10-25T00:30:00+00:00",  # 02:30 CEST
        "2026-10-26T01:30:00+00:00",  # 02:30 CET
    ]


def test_fall_back_an_hourly_cron_fires_every_real_hour_both_two_oclocks_included():
    got = day_of("0 * * * *", utc(2026, 10, 24, 23, 30), utc(2026, 10, 25, 2, 30))
    assert got == [
        "2026-10-25T00:00:00+00:00",  # 02:00 CEST
        "2026-10-25T01:00:00+00:00",  # 02:00 CET
        "2026-10-25T02:00:00+00:00",  # 03:00 CET
    ]


def test_a_utc_cron_knows_no_transition():
    assert day_of("30 2 * * *", utc(2026, 3, 28, 12), utc(2026, 3, 30, 12), "UTC") == [
        "2026-03-29T02:30:00+00:00",
        "2026-03-30T02:30:00+00:00",
    ]


def test_intervals_are_anchored_at_start_at_or_the_epoch_and_bounded_by_end_at():
    spec = check_spec(None, 90, "UTC", 0, None, None)
    assert spec.next_after(utc(2026, 1, 1, 0, 0, 1)) == utc(2026, 1, 1, 0, 1, 30)
    start = utc(2026, 1, 1, 0, 0, 7)
    spec = check_spec(None, 10, "UTC", 0, start, start + timedelta(seconds=25))
    assert spec.ticks(utc(2025, 1, 1), utc(2027, 1, 1), 10) == [start + timedelta(seconds=s) for s in (0, 10, 20)]
    assert spec.next_after(start + timedelta(seconds=20)) is None


def test_jitter_is_fixed_per_tick_and_within_bounds():
    spec = check_spec(None, 60, "UTC", 30, None, None)
    tick = utc(2026, 1, 1, 0, 1)
    fire = spec.fire_at("s", tick)
    assert fire == spec.fire_at("s", tick) and tick <= fire < tick + timedelta(seconds=30)
    assert len({spec.fire_at("s", tick + timedelta(minutes=i)) - tick - timedelta(minutes=i) for i in range(20)}) > 1


def test_the_ticks_workflow_id_is_the_schedule_and_the_utc_time():
    assert tick_workflow_id("nightly", utc(2026, 12, 5, 2, 30)) == "sched:nightly:2026-12-05T02:30:00Z"
    assert tick_workflow_id("n", utc(2026, 1, 1, 0, 0, 0, 5)) == "sched:n:2026-01-01T00:00:00.000005Z"
