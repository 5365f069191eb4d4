-- Which live worker serves each deployment. A worker upserts one row per (name, version) it
-- registered when it starts, refreshes them all in one statement from its heartbeat thread
-- (every max(lease_ttl, 5 s) by default), and deletes them on a clean exit. live_until is the
-- worker's own bound (seen_at + 3 refresh periods), so workers with different settings are
-- judged by their own schedule; a SIGKILLed worker's rows stay, past live_until. Due work of a
-- pair with no row live (live_until > now()) is unserved: rt.unserved(), rt.drain_report().
create table if not exists ilr.worker_deployments (
  worker_id text not null,
  name text not null,
  version text not null,
  seen_at timestamptz not null default now(),
  live_until timestamptz not null,
  primary key (worker_id, name, version),
  foreign key (name, version) references ilr.deployments
);
