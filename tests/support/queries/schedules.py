"""Statements the tests run on ilr.schedules and ilr.schedule_ticks: reads of state the public API does not give, and
the rows they seed or tamper with on purpose."""

from __future__ import annotations

ANY_TICKS_BY_SCHEDULED_AT = "select 1 from ilr.schedule_ticks where scheduled_at <= %s"
"""Read ilr.schedule_ticks
(``integration/test_schedules.test_tick_rows_past_the_retention_are_pruned_and_never_recorded_again``)."""

COUNT_TICKS_BY_SCHEDULE_ID = "select count(*) as n from ilr.schedule_ticks where schedule_id = 'pr'"
"""Read ilr.schedule_ticks
(``integration/test_schedules.test_tick_rows_past_the_retention_are_pruned_and_never_recorded_again``)."""

DELETE_TICKS_BY_WORKFLOW_ID = "delete from ilr.schedule_ticks where workflow_id = %s"
"""Delete rows of ilr.schedule_ticks
(``integration/test_schedules.test_tick_rows_past_the_retention_are_pruned_and_never_recorded_again``)."""

OUTCOME_REASON_LATE_OF_TICKS_BY_SCHEDULE_ID = (
    "select outcome, reason, recorded_at - scheduled_at as late from ilr.schedule_ticks where schedule_id = 'cw'"
)
"""Read ilr.schedule_ticks
(``integration/test_schedules.test_ticks_older_than_the_catch_up_window_are_missed_with_the_reason``)."""

SCHEDULED_AT_OUTCOME_OPEN_ETC_OF_TICKS_BY_SCHEDULE_ID = (
    "select scheduled_at, outcome, open, now() - scheduled_at as age from ilr.schedule_ticks "
    "where schedule_id = 'pr' order by scheduled_at"
)
"""Read ilr.schedule_ticks
(``integration/test_schedules.test_tick_rows_past_the_retention_are_pruned_and_never_recorded_again``)."""

SCHEDULED_AT_OUTCOME_REASON_ETC_OF_TICKS_BY_SCHEDULE_ID = (
    "select t.scheduled_at, t.outcome, t.reason, t.workflow_id, t.started_at, w.created_at "
    "from ilr.schedule_ticks t left join ilr.workflows w on w.id = t.workflow_id "
    "where t.schedule_id = %s order by t.scheduled_at"
)
"""Read ilr.schedule_ticks (``faults/test_schedules.ticks``)."""

SCHEDULED_AT_STARTED_AT_ID_ETC_OF_TICKS_BY_SCHEDULE_ID = (
    "select t.scheduled_at, t.started_at, w.id, w.status, w.created_at, w.updated_at as ended, "
    "w.cancel_requested_by from ilr.schedule_ticks t join ilr.workflows w on w.id = t.workflow_id "
    "where t.schedule_id = %s order by t.scheduled_at"
)
"""Read ilr.schedule_ticks (``faults/test_schedules.started_runs``)."""

SCHEDULED_AT_WORKFLOW_ID_STARTED_AT_OF_TICKS_BY_SCHEDULE_ID = (
    "select scheduled_at, workflow_id, started_at from ilr.schedule_ticks where schedule_id = 'race' "
    "order by scheduled_at"
)
"""Read ilr.schedule_ticks
(``integration/test_schedules.test_two_connections_racing_the_tick_start_each_tick_once``)."""

SEED_SCHEDULES_HELD = (
    "insert into ilr.schedules (id, workflow_name, input, every_s, next_tick_at, next_fire_at, paused) values "
    "('held', 'refund', '{}', 60, now() - interval '900 s', now() - interval '900 s', true)"
)
"""Seed rows of ilr.schedules (``support/ops_state.seed``)."""

SEED_SCHEDULES_LATE = (
    "insert into ilr.schedules (id, workflow_name, input, every_s, next_tick_at, next_fire_at) values "
    "('late', 'refund', '{}', 60, now() - interval '120 s', now() - interval '120 s')"
)
"""Seed rows of ilr.schedules (``support/ops_state.seed``)."""

SEED_SCHEDULES_S = "insert into ilr.schedules (id, workflow_name, input, every_s) values ('S', 'refund', '{}', 10)"
"""Seed rows of ilr.schedules (``integration/test_invariants._schedule``)."""

SEED_TICKS = (
    "insert into ilr.schedule_ticks (schedule_id, scheduled_at, kind, overlap, outcome, workflow_id, open, "
    "started_at) values ('S', %s, 'tick', %s, 'started', %s, true, clock_timestamp())"
)
"""Seed rows of ilr.schedule_ticks (``integration/test_invariants._tick``)."""

SET_SCHEDULES_NEXT_FIRE_AT_BY_ID = "update ilr.schedules set next_fire_at = 'infinity' where id = 'ov'"
"""Set columns on ilr.schedules (``integration/test_schedules.test_each_overlap_policy_against_an_active_run``)."""

SET_SCHEDULES_NEXT_TICK_AT_NEXT_FIRE_AT_BY_ID = (
    "update ilr.schedules set next_tick_at = date_trunc('second', now()) - make_interval(secs => %s), "
    "next_fire_at = date_trunc('second', now()) - make_interval(secs => %s) where id = %s"
)
"""Set columns on ilr.schedules (``integration/test_schedules._due``)."""

MIN_SCHEDULED_AT_OF_TICKS_BY_SCHEDULE_ID = (
    "select min(scheduled_at) as t from ilr.schedule_ticks where schedule_id = 'pr'"
)
"""Read ilr.schedule_ticks
(``integration/test_schedules.test_tick_rows_past_the_retention_are_pruned_and_never_recorded_again``)."""
