"""Statements on ilr.schedules and ilr.schedule_ticks: schedules, their ticks and the runs the
ticks started (docs/protocol.md §5.8)."""

from __future__ import annotations

SCHEDULE_COLUMNS = (
    "id, workflow_name, workflow_version, input, cron, every_s, timezone, jitter_s, start_at, end_at, overlap, "
    "catchup_window_s, pause_on_failure, paused, note, next_tick_at, next_fire_at, buffered, source, created_at, "
    "updated_at, ticks_pruned_through"
)
"""The columns a schedule read returns."""

DB_NOW = "select now() as now"
"""The database clock at the transaction's start: every tick decision is taken against it."""

SCHEDULE_LOCK = (
    f"select {SCHEDULE_COLUMNS}, now() as db_now, true as has_open from ilr.schedules where id = %s for update"
)
"""Lock one schedule's row, waiting for a worker's tick transaction on it (``_schedules.ops``)."""

SCHEDULE_GET = f"select {SCHEDULE_COLUMNS} from ilr.schedules where id = %s"
"""Read one schedule (``_schedules.ops.describe_schedule_on``)."""

SCHEDULE_LIST = f"select {SCHEDULE_COLUMNS} from ilr.schedules order by id"
"""Every schedule, by id (``_schedules.ops.schedules_on``)."""

SCHEDULE_INSERT = (
    "insert into ilr.schedules (id, workflow_name, workflow_version, input, cron, every_s, timezone, jitter_s, "
    "start_at, end_at, overlap, catchup_window_s, pause_on_failure, next_tick_at, next_fire_at, source) values (%s, "
    "%s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
)
"""Create a schedule (``_schedules.ops.schedule_in``)."""

SCHEDULE_UPDATE = (
    "update ilr.schedules set workflow_name = %s, workflow_version = %s, input = %s::jsonb, cron = %s, "
    "every_s = %s, timezone = %s, jitter_s = %s, start_at = %s, end_at = %s, overlap = %s, catchup_window_s = "
    "%s, pause_on_failure = %s, next_tick_at = %s, next_fire_at = %s, source = %s, updated_at = now() where id = %s"
)
"""Update a schedule's definition and next tick (``_schedules.ops.schedule_in``)."""

SCHEDULE_SAVE = (
    "update ilr.schedules set next_tick_at = %s, next_fire_at = %s, paused = %s, note = %s, buffered = (select "
    "count(*) from ilr.schedule_ticks t where t.schedule_id = %s and t.outcome = 'buffered'), updated_at = now() "
    "where id = %s"
)
"""Advance a schedule after its ticks were handled: next tick, pause and note, the buffered count
(``_schedules.ticks``, ``_schedules.ops``)."""

SCHEDULE_DELETE = "delete from ilr.schedules where id = %s returning id"
"""Delete a schedule and its tick records (cascade); its runs go on (``_schedules.ops``)."""

DUE_SCHEDULES = (
    f"select {SCHEDULE_COLUMNS}, now() as db_now, exists (select 1 from ilr.schedule_ticks t where t.schedule_id = "
    "s.id and t.open) as has_open from ilr.schedules s where not paused and (next_fire_at <= now() or buffered > 0) "
    "order by next_fire_at limit %s for update of s skip locked"
)
"""The worker's tick query: schedules due on the database clock, or holding buffered ticks, locked
without waiting (a schedule another worker holds is skipped: it is being ticked), and whether
any of its started ticks may still run (``has_open``)."""

TICK_RECORD = (
    "insert into ilr.schedule_ticks as t (schedule_id, scheduled_at, kind, overlap, outcome, reason, workflow_id, "
    "open, started_at) values (%s, %s, %s, %s, %s, %s, %s, %s, case when %s then clock_timestamp() end) on conflict "
    "(schedule_id, scheduled_at) do update set kind = excluded.kind, overlap = excluded.overlap, outcome = "
    "excluded.outcome, reason = excluded.reason, workflow_id = excluded.workflow_id, open = excluded.open, "
    "started_at = excluded.started_at, recorded_at = now() where t.outcome <> 'started' and (excluded.outcome = "
    "'started' or (t.outcome in ('missed', 'skipped') and excluded.outcome = 'buffered') or (t.outcome = "
    "'buffered' and excluded.outcome <> 'buffered')) returning id"
)
"""Record a tick, once (its start at clock_timestamp(): after the ends its transaction saw): a
tick already started is never recorded again; a buffered, missed or
skipped one may yet start (a buffer, a backfill), a missed or skipped one be buffered, and a
buffered one end missed or skipped. Returns no row when the record stands as it was."""

TICK_SKIP_BUFFERED = (
    "update ilr.schedule_ticks set outcome = 'skipped', reason = %s, recorded_at = now() where schedule_id = %s "
    "and outcome = 'buffered'"
)
"""Drop a schedule's buffered ticks as skipped (cancel_other keeps only the newest tick)."""

TICK_OLDEST_BUFFERED = (
    "select scheduled_at, kind, overlap from ilr.schedule_ticks where schedule_id = %s and outcome = 'buffered' "
    "order by scheduled_at limit 1"
)
"""A schedule's oldest buffered tick: the next to start when no run is active."""

OPEN_RUNS = (
    "with recursive chain (scheduled_at, root, id, status, result) as (select t.scheduled_at, t.workflow_id, "
    "w.id, w.status, w.result from ilr.schedule_ticks t join ilr.workflows w on w.id = t.workflow_id where "
    "t.schedule_id = %s and t.open union all select c.scheduled_at, c.root, w.id, w.status, w.result from chain c "
    "join ilr.workflows w on w.id = c.result->>'continued_as' where c.status = 'continued') "
    "select scheduled_at, root, id, status from chain where status <> 'continued' order by scheduled_at"
)
"""The last run of each open tick's workflow, following continue-as-new: active, or how it ended."""

TICK_CLOSE = (
    "update ilr.schedule_ticks set open = false, final_status = %s where schedule_id = %s and scheduled_at = %s"
)
"""Note that a started tick's run ended, and how (``_schedules.ticks``)."""

TICKS_RECENT = (
    "select scheduled_at, kind, overlap, outcome, reason, workflow_id, open, final_status, recorded_at, started_at "
    "from "
    "ilr.schedule_ticks where schedule_id = %s and outcome = any(%s) order by scheduled_at desc limit %s"
)
"""A schedule's newest tick records of the given outcomes (``describe_schedule``)."""

SCHEDULED_TIME = "select scheduled_at from ilr.schedule_ticks where workflow_id = %s"
"""The scheduled time of a tick's workflow (``ctx.scheduled_time``); no row: not a tick's."""

CODE_SCHEDULES = "select id from ilr.schedules where source = 'code' order by id"
"""The schedules declared in code (``_schedules.declared.sync_in`` prunes among them)."""

TICK_PRUNE = (
    "with gone as (delete from ilr.schedule_ticks where id in (select id from ilr.schedule_ticks where schedule_id "
    "= %s and scheduled_at < %s and not open and outcome <> 'buffered' order by scheduled_at limit %s) returning "
    "scheduled_at) update ilr.schedules set ticks_pruned_through = greatest(ticks_pruned_through, (select "
    "max(scheduled_at) from gone)) where id = %s and exists (select 1 from gone) returning ticks_pruned_through"
)
"""Delete up to a batch of a schedule's oldest tick rows before a horizon whose run ended (or that
were skipped or missed; never an open or buffered one), and move ``ticks_pruned_through`` up to
the newest deleted (``_schedules.ticks``; the horizon's reasoning: docs/protocol.md §5.8). Returns
no row when nothing was deleted."""

TICK_EXISTS = "select 1 from ilr.schedule_ticks where schedule_id = %s and scheduled_at = %s"
"""Whether a tick has its row: asked only of a tick at or before ``ticks_pruned_through``, where a
missing row means pruned (``_schedules.ticks.Ticker.record``)."""
