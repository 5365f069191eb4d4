"""The reads of the invariant checker's snapshot (ilr._invariants): every table, read once."""

from __future__ import annotations

LOAD_SELECT_STEPS = (
    "select workflow_id, seq, name, kind, fingerprint, output, error, epoch, created_at, extract(epoch "
    "from created_at)::float8 as ts from ilr.steps order by workflow_id, seq"
)
"""Read from ilr.steps (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_CLAIMS = (
    "select *, extract(epoch from claimed_at)::float8 as ts from ilr.claims order by workflow_id, epoch"
)
"""Read from ilr.claims (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_SIGNALS = "select * from ilr.signals order by id"
"""Read from ilr.signals (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_SLOTS = (
    "select *, extract(epoch from queued_at)::float8 as queued_ts, extract(epoch from acquired_at)::float8 "
    "as acquired_ts, extract(epoch from released_at)::float8 as released_ts, extract(epoch from not_before)::float8 "
    "as not_before_ts from ilr.slots order by id"
)
"""Read from ilr.slots (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_JOURNAL = "select effect_id, body from ilr.journal order by seq"
"""Read from ilr.journal (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_RESPONSES = "select * from ilr.responses order by id"
"""Read from ilr.responses (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SET_SQL = "set transaction isolation level repeatable read, read only"
"""Set (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_WORKFLOWS = (
    "select id, name, version, status, epoch, owner, cancel_requested_at, available_at, updated_at, waiting, "
    "error, forked_from, concurrency_key, concurrency_limit, queue, queue_limit, queue_rates, "
    "extract(epoch from cancel_requested_at)::float8 as cancel_ts "
    "from ilr.workflows"
)
"""Read from ilr.workflows (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_GRANTS = "select *, extract(epoch from revoked_at)::float8 as revoked_ts from ilr.grants"
"""Read from ilr.grants (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_EFFECTS = "select * from ilr.effects"
"""Read from ilr.effects (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_SQL = (
    "select tgname, tgenabled from pg_trigger t join pg_class c on c.oid = t.tgrelid join pg_namespace n "
    "on n.oid = c.relnamespace where n.nspname = 'ilr' and not t.tgisinternal"
)
"""Read (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_SQL_2 = "select indexname from pg_indexes where schemaname = 'ilr'"
"""Read (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_SCHEDULE_TICKS = (
    "with recursive chain (tick_id, id, status, updated_at, result) as (select t.id, w.id, w.status, w.updated_at, "
    "w.result from ilr.schedule_ticks t join ilr.workflows w on w.id = t.workflow_id union all select c.tick_id, "
    "w.id, w.status, w.updated_at, w.result from chain c join ilr.workflows w on w.id = c.result->>'continued_as' "
    "where c.status = 'continued') select t.id, t.schedule_id, t.workflow_id, t.kind, t.overlap, t.outcome, "
    "t.scheduled_at, "
    "extract(epoch from t.scheduled_at)::float8 as scheduled_ts, extract(epoch from t.started_at)::float8 as "
    "started_ts, extract(epoch from w.created_at)::float8 as created_ts, (select case when c.status in ('pending', "
    "'running', 'sleeping') then null else extract(epoch from c.updated_at)::float8 end from chain c where "
    "c.tick_id = t.id and c.status <> 'continued' limit 1) as ended_ts from ilr.schedule_ticks t left join "
    "ilr.workflows w on w.id = t.workflow_id order by t.schedule_id, t.scheduled_at"
)
"""Every tick with its workflow's insert time and its run's end (the last of its continue-as-new
chain; null while active) (``_invariants.snapshot.Snapshot.load``)."""

LOAD_SELECT_UNTICKED_WORKFLOWS = (
    "select w.id, s.id as schedule_id, s.ticks_pruned_through from ilr.workflows w join ilr.schedules s on "
    "left(w.id, length(s.id) + 7) = 'sched:' || s.id || "
    "':' where strpos(w.id, '#') = 0 and strpos(w.id, '/') = 0 and w.created_at >= s.created_at and not exists "
    "(select 1 from ilr.schedule_ticks t where t.workflow_id = w.id) order by w.id"
)
"""First runs named as a schedule's tick (``sched:<schedule>:...``), inserted since the schedule was
created (a deleted schedule's ticks went with it), that no tick row started, with the schedule's
``ticks_pruned_through`` (a pruned tick's run is one of them)."""
