-- Schedules (docs/protocol.md §5.8): a workflow started per tick of a cron or interval spec,
-- exactly once per tick across workers with no leader.
--
-- ilr.schedules holds the spec and the next tick; a worker's tick transaction locks the due rows
-- (for update skip locked: no worker waits on another), starts each due tick's workflow
-- (id sched:<schedule>:<UTC time>, on conflict do nothing) and advances next_tick_at, in one
-- transaction. ilr.schedule_ticks records every tick a schedule met: started (the workflow it
-- started), buffered (waiting for the running one to end), skipped (the overlap policy), missed
-- (older than the catch-up window, or the start was refused); one row per (schedule, tick).
create table if not exists ilr.schedules (
  id               text primary key,
  workflow_name    text not null,
  workflow_version text,                       -- null: the newest unretired version at each tick
  input            jsonb not null,
  cron             text,                       -- a 5-field cron expression in timezone
  every_s          double precision,           -- or an interval, from start_at (else the epoch)
  timezone         text not null default 'UTC',
  jitter_s         double precision not null default 0,
  start_at         timestamptz,
  end_at           timestamptz,
  overlap          text not null default 'skip',
  catchup_window_s double precision not null default 60,
  pause_on_failure boolean not null default false,
  paused           boolean not null default false,
  note             text,                       -- why it is paused: by whom, or the failed run
  next_tick_at     timestamptz,                -- the next nominal tick (null: none left)
  next_fire_at     timestamptz,                -- next_tick_at plus its jitter: when it starts
  buffered         integer not null default 0, -- its ticks with outcome 'buffered'
  source           text not null default 'api', -- 'code': declared in code, synced (ilr_schedules sync)
  created_at       timestamptz not null default now(),
  updated_at       timestamptz not null default now(),
  constraint schedules_spec check ((cron is null) <> (every_s is null) and (every_s is null or every_s > 0)),
  constraint schedules_overlap check (overlap in
    ('skip', 'buffer_one', 'buffer_all', 'cancel_other', 'terminate_other', 'allow_all')),
  constraint schedules_source check (source in ('api', 'code')),
  constraint schedules_seconds check (jitter_s >= 0 and catchup_window_s >= 0 and buffered >= 0),
  constraint schedules_range check (start_at is null or end_at is null or end_at > start_at)
);
-- The worker's tick query: due and not paused, or holding buffered ticks.
create index if not exists schedules_due on ilr.schedules (next_fire_at) where not paused;
create index if not exists schedules_buffered on ilr.schedules (id) where buffered > 0 and not paused;

create table if not exists ilr.schedule_ticks (
  id           bigserial primary key,
  schedule_id  text not null references ilr.schedules (id) on delete cascade,
  scheduled_at timestamptz not null,           -- the nominal tick (a trigger's: its database time)
  kind         text not null check (kind in ('tick', 'trigger', 'backfill')),
  overlap      text,                           -- the overlap policy it was handled under
  outcome      text not null check (outcome in ('started', 'buffered', 'skipped', 'missed')),
  reason       text,                           -- why skipped or missed
  workflow_id  text unique,                    -- started: sched:<schedule>:<scheduled_at UTC>
  open         boolean not null default false, -- started, and its run not yet seen ended
  final_status text,                           -- the run's end once seen (the last of its chain)
  recorded_at  timestamptz not null default now(),
  started_at   timestamptz,                    -- clock_timestamp() of its start, after the runs it saw ended
  unique (schedule_id, scheduled_at),
  constraint schedule_ticks_started check ((outcome = 'started') = (workflow_id is not null))
);
create index if not exists schedule_ticks_open on ilr.schedule_ticks (schedule_id) where open;
create index if not exists schedule_ticks_buffered on ilr.schedule_ticks (schedule_id, scheduled_at)
  where outcome = 'buffered';
