-- Failover (README "Failover"): the WAL timelines this database has been written on, as the
-- runtime first saw each one. A promoted standby starts a new timeline; a worker reads the
-- current one when it opens its claim connection and records it here (on conflict nothing),
-- so seen_at is the database time the runtime first noticed the switch. The migration records
-- the timeline it ran on: the baseline, whose row no switch precedes.
create table if not exists ilr.timelines (
  timeline_id int primary key,
  seen_at timestamptz not null default now()
);

-- The timeline WAL is being written on now (the first 8 hex digits of the current WAL file's
-- name; pg_control_checkpoint() lags behind a promotion until the next checkpoint). Raises on a
-- standby (recovery in progress), which takes no writes anyway.
create or replace function ilr.current_timeline() returns int language sql volatile as
  $$ select ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int $$;

-- The epoch a claim issues: one more than the last, and at least (timeline - 1) * 2^32. Epochs
-- issued on a lost tail of an older timeline (asynchronous replication, the primary died) are
-- below the floor of every later timeline, so no epoch is issued twice and a worker still
-- holding a lost epoch is fenced out on the new primary. On timeline 1 the floor is 0.
create or replace function ilr.next_epoch(epoch bigint) returns bigint language sql volatile as
  $$ select greatest(epoch + 1, (ilr.current_timeline() - 1)::bigint << 32) $$;

-- The earliest created_at along a workflow's lineage (itself, its parent, the run it continued
-- from, and theirs): a child or successor re-created after a failover belongs to a lineage
-- that existed before it.
create or replace function ilr.lineage_created_at(wf text) returns timestamptz language sql stable as $$
  with recursive up(id, parent, created_at, depth) as (
    select id, coalesce(parent_id, continued_from), created_at, 0 from ilr.workflows where id = wf
    union all
    select w.id, coalesce(w.parent_id, w.continued_from), w.created_at, up.depth + 1
      from ilr.workflows w join up on w.id = up.parent where up.depth < 1000)
  select min(created_at) from up $$;

insert into ilr.timelines (timeline_id) select ilr.current_timeline() on conflict do nothing;
