"""The operations figures' cost bench's statements (prove.bench.figures): its seed, in the shares
of a busy system, and the read without migration 0022's indexes."""

FIGURES_DROP_INDEXES = "drop index ilr.wf_stuck, ilr.effects_ambiguous"
"""The operations figures' two partial indexes (migration 0022) gone, inside the transaction the
bench rolls back: the read without them."""

FIGURES_SEED_DEPLOYMENTS = "insert into ilr.deployments select 'fig', v::text, 'sha' from generate_series(1, 5) v"
"""Five versions of the workflow ``fig``."""

FIGURES_SEED_WORKFLOWS = """
insert into ilr.workflows (id, name, version, input, status, epoch, owner, lease_expires_at, available_at, error,
                           created_at, updated_at)
select 'f' || g, 'fig', (1 + g %% 5)::text, '{}',
       case when g %% 1000 < 900 then 'completed' when g %% 1000 < 950 then 'pending'
            when g %% 1000 < 970 then 'sleeping' when g %% 1000 < 980 then 'running'
            when g %% 1000 < 985 then 'stuck' else 'failed' end, 1,
       case when g %% 1000 between 970 and 979 then 'w' || (g %% 8) end,
       case when g %% 1000 between 970 and 978 then now() + interval '30 s'
            when g %% 1000 = 979 then now() - interval '1 hour' end,
       case when g %% 1000 between 950 and 969 then now() + interval '1 hour'
            else now() - make_interval(secs => g %% 600) end,
       case when g %% 1000 between 980 and 984 then '{"type": "CrashLoop"}'::jsonb end,
       now() - make_interval(secs => g), now() - make_interval(secs => g %% 3600)
  from generate_series(1, %(n)s) g
"""
"""``n`` workflows: 90% completed, 5% pending and due (the backlog), 2% sleeping until later, 1%
running (a tenth of them with a lapsed lease), 0.5% stuck, 1.5% failed."""

FIGURES_SEED_EFFECTS = """
insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, first_dispatched_at,
                         reconciled)
select 'e' || g, 'f' || g, 'bench', 1, '{}', 'h' || g, case when g %% 1000 = 7 then 'ambiguous' else 'committed' end,
       now() - make_interval(secs => g), case when g %% 2000 = 7 then '{"who": "ops"}'::jsonb end
  from generate_series(1, %(n)s) g where g %% 1000 < 900
"""
"""An effect per completed workflow; one in a thousand ambiguous, half of those reconciled."""

FIGURES_SEED_APPROVALS = """
insert into ilr.approval_requests (id, workflow_id, seq, target, action, effect_key, payload, payload_hash, status,
                                   requested_at, expires_at, decided_at)
select 'a' || g, 'f' || g, 1, 'bench', 'refund', 'k' || g, '{}', 'h',
       case when g %% 1000 between 950 and 969 then 'pending' else 'rejected' end,
       now() - make_interval(secs => g %% 7200), now() + interval '1 day',
       case when g %% 1000 between 950 and 969 then null else now() end
  from generate_series(1, %(n)s) g where g %% 5 = 0 or g %% 1000 between 950 and 969
"""
"""An approval request for a fifth of the workflows (decided) and for every sleeping one (pending)."""

FIGURES_SEED_SLOTS = """
insert into ilr.slots (key, workflow_id, slot_limit, slot_no, queued_at, acquired_at, released_at, released_why)
select 'acct:' || (g %% 500), 'f' || g, 1000, null, now() - interval '1 hour', null, now(), 'completed'
  from generate_series(1, %(n)s) g where g %% 10 = 0
"""
"""Released slots of concurrency keys for a tenth of the workflows (history the live scans skip)."""

FIGURES_SEED_SCHEDULES = """
insert into ilr.schedules (id, workflow_name, input, every_s, next_tick_at, next_fire_at)
select 's' || g, 'fig', '{}', 60, now() + make_interval(secs => g % 60), now() + make_interval(secs => g % 60)
  from generate_series(1, 1000) g
"""
"""A thousand schedules, none overdue."""
