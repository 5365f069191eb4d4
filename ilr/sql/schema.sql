-- The ilr schema (docs/protocol.md §2), with ilr.claims (the claim history) and ilr.responses
-- (the sender's own response log that LateResultPreserved is checked against, §11).
-- This file is the current schema; ilr/sql/migrations/*.sql replay to the same catalog
-- (tests/integration/test_schema.py checks it).

create schema if not exists ilr;

create table if not exists ilr.deployments (
  name text not null,
  version text not null,
  code_sha256 text not null,                -- sha256 of the workflow function's module source bytes
  created_at timestamptz not null default now(),
  retired_at timestamptz,
  primary key (name, version)
);

create table if not exists ilr.workflows (
  id text primary key,
  name text not null,
  version text not null,
  input jsonb not null,
  status text not null default 'pending' constraint workflows_status_check check (status in
    ('pending','running','sleeping','completed','failed','cancelled','stuck','continued','terminated')),
  epoch bigint not null default 0,          -- fencing token, +1 on every claim
  owner text,
  lease_expires_at timestamptz,
  takeovers int not null default 0,         -- claims that died since the last recorded step
  available_at timestamptz not null default now(),   -- 'infinity' while waiting with no timeout
  waiting jsonb,                            -- {seq, kind, until, signal, attempt}
  cancel_requested_at timestamptz,
  result jsonb,
  error jsonb,
  parent_id text,
  continued_from text,
  forked_from text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  cancel_requested_by text,                 -- who requested the cancel (migration 0007); set once, with cancel_requested_at
  resumed_by text,                          -- who last resumed it from stuck (migration 0009); with resumed_at
  resumed_at timestamptz,
  priority smallint not null default 0,     -- higher is claimed first among due rows (migration 0015)
  concurrency_key text,                     -- its slots in ilr.slots (migration 0016)
  concurrency_limit smallint,
  queue text,                               -- its ILR_QUEUES queue, and the rule the start read (migration 0016)
  queue_limit smallint,
  queue_rates jsonb,
  holds_locks boolean not null default false, -- took a ctx.lock slot (migration 0016)
  dedup_key text,                           -- rt.start(dedup_key=) (migration 0016)
  parent_close_policy text,                 -- a child's: what its parent's end does to it (migration 0017)
  trace_context text,                       -- the W3C traceparent its spans descend from (migration 0023)
  foreign key (name, version) references ilr.deployments,
  constraint workflows_cancel_requested_by_with_at check (cancel_requested_by is null or cancel_requested_at is not null),
  constraint workflows_resumed_by_with_at check ((resumed_by is null) = (resumed_at is null)),
  constraint workflows_priority_range check (priority between -100 and 100),
  constraint workflows_concurrency check (
    (concurrency_key is null) = (concurrency_limit is null) and concurrency_limit between 1 and 1000),
  constraint workflows_queue check ((queue_limit is null or queue is not null) and queue_limit between 1 and 1000),
  constraint workflows_parent_close_policy check (
    parent_close_policy is null or (parent_close_policy in ('request_cancel', 'abandon', 'terminate') and parent_id is not null))
);
create index if not exists wf_due on ilr.workflows (available_at) where status in ('pending','sleeping');
-- Due rows of another priority than 0, highest first (migration 0015): the claim scans it before
-- and after wf_due.
create index if not exists wf_due_priority on ilr.workflows (priority desc, available_at)
  where status in ('pending','sleeping') and priority <> 0;
-- Running rows by id, not by lease: renewals stay HOT updates (migration 0004).
create index if not exists wf_running on ilr.workflows (id) where status = 'running';
-- The stuck workflows, for the operations figures (ilr._telemetry.figures).
create index if not exists wf_stuck on ilr.workflows (id) where status = 'stuck';
-- A workflow's children (migration 0017).
create index if not exists wf_children on ilr.workflows (parent_id) where parent_id is not null;
-- The newest workflow of a deduplication key (migration 0016).
create index if not exists wf_dedup on ilr.workflows (dedup_key, created_at desc) where dedup_key is not null;
alter table ilr.workflows set (fillfactor = 80);

create table if not exists ilr.steps (
  workflow_id text not null references ilr.workflows(id),
  seq int not null,
  name text not null,
  kind text not null constraint steps_kind_check check (kind in ('step','decide','effect','sleep','signal','patch','child','lock')),
  fingerprint text,                         -- effect: effect_id||':'||payload_hash; decide: request_hash; child: an explicit child id; signal: 'signal:'||id of the consumed signal; else null
  output jsonb,
  error jsonb,
  epoch bigint not null,
  created_at timestamptz not null default now(),
  primary key (workflow_id, seq)
);

create table if not exists ilr.llm_calls (  -- written in autocommit BEFORE each model call; measures discarded calls
  id bigserial primary key,
  workflow_id text not null,
  seq int not null,
  epoch bigint not null,
  request_hash text not null,
  started_at timestamptz not null default now()
);

create table if not exists ilr.signals (
  id bigserial primary key,
  workflow_id text not null references ilr.workflows(id),
  name text not null,
  payload jsonb not null,
  sender text,
  consumed_seq int,
  created_at timestamptz not null default now(),
  unique (workflow_id, consumed_seq)
);

create table if not exists ilr.grants (     -- policy grants and human approvals
  id text primary key,
  principal text not null,
  action text not null,
  max_cents bigint,                         -- null: no cap
  payload_hash text,                        -- set by an approval: only this exact payload
  facts_seen jsonb,                         -- set by an approval: the premises it authorizes
  granted_by text not null,
  expires_at timestamptz,
  revoked_at timestamptz,
  created_at timestamptz not null default now(),
  revoked_by text,                          -- who revoked it (migration 0006); set with revoked_at, once
  constraint grants_revoked_by_with_revoked_at check (revoked_by is null or revoked_at is not null)
);

create table if not exists ilr.effects (
  effect_id text primary key,               -- effect_id_for({"request_id": key})
  workflow_id text not null references ilr.workflows(id),   -- first proposer
  target text not null,
  tier smallint not null check (tier in (1,2,3)),
  payload jsonb not null,
  payload_hash text not null,               -- bound at first proposal, immutable (trigger)
  state text not null default 'proposed' check (state in ('proposed','dispatched','committed','ambiguous')),
  grant_id text references ilr.grants(id),  -- grant of the current or last dispatch
  dispatch_workflow_id text,
  dispatch_epoch bigint,                    -- (dispatch_workflow_id, dispatch_epoch) may finish the current send
  first_dispatched_at timestamptz,          -- database clock; tier-1 window age is measured from here
  send_deadline timestamptz,                -- no query or resend before send_deadline + settle_margin
  settle_margin interval,
  sends int not null default 0,             -- incremented in the transaction that authorizes each send
  late_result jsonb,
  reconciled jsonb,                         -- human attestation for AMBIGUOUS: a copy of its signed RECONCILED entry
  last_error jsonb,                         -- the last unknown-outcome answer of a send {type, message, send, at, in_progress, repeated, unanswered}
  next_attempt_at timestamptz,              -- recovery acts no earlier (the resend policy's backoff)
  head_hash text,                           -- the chain's last entry (trigger journal_head): a chain ending before it was truncated
  head_n int                                -- and its position n (1 for the first entry)
);
create index if not exists effects_open on ilr.effects (send_deadline) where state = 'dispatched';
create index if not exists effects_by_grant on ilr.effects (grant_id) where state = 'dispatched';
-- A workflow's effects: the case page, and the case list's refused and ambiguous outcomes
-- (approvals/cases.py).
create index if not exists effects_by_workflow on ilr.effects (workflow_id);
-- The ambiguous effects no person has reconciled, for the operations figures.
create index if not exists effects_ambiguous on ilr.effects (effect_id)
  where state = 'ambiguous' and reconciled is null;

create table if not exists ilr.journal (
  seq bigserial primary key,
  effect_id text not null references ilr.effects(effect_id),
  kind text not null,
  body text not null,                       -- the sealed entry's JSON text, stored verbatim, never jsonb
  prev text,
  hash text not null unique,
  n int,                                    -- the entry's position in its chain, as sealed (null: written before migration 0014)
  unique nulls not distinct (effect_id, prev),
  constraint journal_kind_check check (kind in (
    'PROPOSED','AUTHORIZED','DISPATCHED','RESENT','COMMITTED','REFUSED','AMBIGUOUS','LATE_RESULT','RECONCILED'))
);
create unique index if not exists one_commit on ilr.journal (effect_id) where kind = 'COMMITTED';
create unique index if not exists one_reconcile on ilr.journal (effect_id) where kind = 'RECONCILED';
create index if not exists journal_tail on ilr.journal (effect_id, seq);  -- the chain's tail (journal.LAST_HASH_SQL)

-- Claim history (docs/protocol.md §2): written by the claim statement itself. LeaseMutex,
-- TakeoverOnlyAfterExpiry, FencedWrites and SendRequiresLiveClaim are checked over it.
create table if not exists ilr.claims (
  workflow_id text not null references ilr.workflows(id),
  epoch bigint not null,
  owner text not null,
  version text not null,
  claimed_at timestamptz not null,
  lease_expires_at timestamptz not null,
  prev_status text not null,
  prev_lease_expires_at timestamptz,
  primary key (workflow_id, epoch)
);

-- The sender's own response log: a worker appends every target response here, in autocommit,
-- before T_commit, so LateResultPreserved can compare responses with LATE_RESULT entries.
create table if not exists ilr.responses (
  id bigserial primary key,
  effect_id text not null,
  workflow_id text not null,
  epoch bigint not null,
  result jsonb,
  received_at timestamptz not null default now()
);
create index if not exists responses_by_effect on ilr.responses (effect_id);

-- Which live worker serves each deployment (migration 0008): upserted at a worker's start,
-- refreshed from its heartbeat thread, deleted on a clean exit; live while live_until > now().
create table if not exists ilr.worker_deployments (
  worker_id text not null,
  name text not null,
  version text not null,
  seen_at timestamptz not null default now(),
  live_until timestamptz not null,          -- seen_at + 3 of the worker's refresh periods
  primary key (worker_id, name, version),
  foreign key (name, version) references ilr.deployments
);

create or replace function ilr.append_only() returns trigger language plpgsql as
  $$ begin raise exception 'ilr.% is append-only', tg_table_name; end $$;
create or replace trigger steps_append_only before update or delete on ilr.steps
  for each statement execute function ilr.append_only();
create or replace trigger journal_append_only before update or delete on ilr.journal
  for each statement execute function ilr.append_only();
create or replace trigger claims_append_only before update or delete on ilr.claims
  for each statement execute function ilr.append_only();

-- The chain's head on the effect row (migration 0014), written in the statement that appends:
-- the last entry each statement appended to each chain (an entry with no n counts its chain).
create or replace function ilr.journal_head() returns trigger language plpgsql as $$
begin
  -- The last entry each statement appended to each chain; an entry with no n (written by a
  -- worker older than this migration) counts its chain.
  update ilr.effects e
     set head_hash = h.hash,
         head_n = coalesce(h.n, (select count(*) from ilr.journal j where j.effect_id = h.effect_id))
    from (select distinct on (effect_id) effect_id, hash, n from appended order by effect_id, seq desc) h
   where e.effect_id = h.effect_id;
  return null;
end $$;
create or replace trigger journal_head after insert on ilr.journal
  referencing new table as appended for each statement execute function ilr.journal_head();

create or replace function ilr.effects_guard() returns trigger language plpgsql as $$
begin
  if new.payload_hash <> old.payload_hash then raise exception 'payload binding: % is immutable', old.effect_id; end if;
  if old.state in ('committed','ambiguous') and new.state <> old.state then
    raise exception 'effect % is terminal (%)', old.effect_id, old.state; end if;
  return new;
end $$;
create or replace trigger effects_guard before update on ilr.effects
  for each row execute function ilr.effects_guard();

-- Wakeups (issue 9): a row that becomes due now announces itself on channel ilr_claimable, so
-- idle workers claim at once instead of at their next poll. Polling stays the fallback (timers
-- coming due, lapsed leases, a lost notification). Notifications of one transaction with the
-- same payload are delivered once, so a batch insert wakes each listener once.
create or replace function ilr.notify_claimable() returns trigger language plpgsql as
  $$ begin perform pg_notify('ilr_claimable', ''); return null; end $$;
-- (The triggers that fire it, workflows_claimable and workflows_claimable_insert, are defined
-- with the flow-control functions below: a keyed start announces itself once it holds its slots.)

-- The WAL timelines seen, the epoch floor and the lineage age used after a failover (migration
-- 0010; docs/guides/operating.md "Failover").
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

-- Approval requests: a workflow asks a person (or two) to approve one exact effect. The row is
-- written with the step that records the request, in the workflow's fenced transaction; approve
-- and reject lock it, so an approval and the expiry the workflow records cannot both win.
create table if not exists ilr.approval_requests (
  id text primary key,                      -- 'apr_' + sha256(workflow_id, seq), so a re-run writes the same row
  workflow_id text not null references ilr.workflows(id),
  seq int not null,                         -- the step that records the request
  target text not null,                     -- the effect target's name (the target registry's key)
  action text not null,                     -- what the grant will cover, e.g. 'refund'
  effect_key text not null,                 -- the business idempotency key the effect will use
  payload jsonb not null,                   -- exactly what will be sent
  payload_hash text not null,
  amount_cents bigint,                      -- payload.amount when the payload has one
  premises jsonb,                           -- the facts captured before the request
  decision jsonb,                           -- the decision's reference (Decision.ref), if any
  summary text not null default '',         -- one line for the queue
  approvals_needed int not null default 1 check (approvals_needed in (1, 2)),
  approvals jsonb not null default '[]',    -- [{"by", "at"}], one per distinct approver
  status text not null default 'pending' check (status in ('pending','approved','rejected','expired','cancelled')),
  grant_id text references ilr.grants(id),  -- the payload-bound grant, once approved
  decided_by text,
  reason text,
  requested_at timestamptz not null default now(),
  expires_at timestamptz not null,
  decided_at timestamptz,
  unique (workflow_id, seq),
  constraint approval_requests_grant_when_approved check ((status = 'approved') = (grant_id is not null)),
  constraint approval_requests_decided check ((status = 'pending') = (decided_at is null))
);
create index if not exists approval_requests_pending on ilr.approval_requests (requested_at) where status = 'pending';
-- The receipt page finds the request that issued a grant.
create index if not exists approval_requests_by_grant on ilr.approval_requests (grant_id)
  where grant_id is not null;

-- Flow control (docs/protocol.md §5.4, migration 0016): concurrency keys, queues and ctx.lock.
-- A workflow holds a slot of each of its keys from its start (or admission) until it completes,
-- fails or is cancelled; ilr.slots keeps every holder and waiter, released rows included.
create table if not exists ilr.slots (
  id bigserial primary key,
  key text not null,
  workflow_id text not null references ilr.workflows(id),
  slot_limit smallint not null check (slot_limit between 1 and 1000),
  slot_no smallint,                         -- null while waiting; a holder's number, below slot_limit
  priority smallint not null default 0,     -- the workflow's: waiters are admitted highest first
  queued_at timestamptz not null,          -- when it asked (clock_timestamp() under the key's lock)
  acquired_at timestamptz,                  -- when it became a holder (start, admission or carry)
  released_at timestamptz,                  -- null while live (holding or waiting)
  released_why text,                        -- the workflow's end status, 'continued', 'unlocked', 'revoked by ...'
  not_before timestamptz,                   -- a start's slot of a rated queue or key: when the rate let it run
  deferred_until timestamptz,               -- a queue's waiter put off by its key's rate: its turn, until it comes
  constraint slots_slot_no check (slot_no between 0 and slot_limit - 1),
  constraint slots_holder_acquired check ((slot_no is null) = (acquired_at is null)),
  constraint slots_released_why check ((released_at is null) = (released_why is null))
);
-- At most one live holder per (key, slot number): the database itself refuses a second holder.
create unique index if not exists slots_holder on ilr.slots (key, slot_no)
  where released_at is null and slot_no is not null;
-- One live row per workflow and key; the release and carry find a workflow's rows by it.
create unique index if not exists slots_live on ilr.slots (workflow_id, key) where released_at is null;
-- The queue of a key, in admission order.
create index if not exists slots_waiting on ilr.slots (key, priority desc, queued_at, id)
  where released_at is null and slot_no is null;
-- A key's and a workflow's history, for the admin and describe() (released rows too).
create index if not exists slots_key on ilr.slots (key, queued_at);
create index if not exists slots_workflow on ilr.slots (workflow_id);
-- A key's rate log: its starts' not_before, newest first.
create index if not exists slots_rate on ilr.slots (key, not_before desc) where not_before is not null;
-- The sweep's work (ilr.slot_wake): rows put off by their key's rate, by their turn.
create index if not exists slots_deferred on ilr.slots (deferred_until)
  where deferred_until is not null and released_at is null;

-- Times: queued_at, acquired_at and released_at are clock_timestamp() read under the key's lock, so they
-- order the holders of a key as the lock did (now(), the transaction's start, may precede a wait
-- for the lock). A workflow that takes a slot becomes due at its acquired_at, and a claim needs
-- available_at <= now() of the claim's transaction: no claim of it predates its slot
-- (NoRunWithoutSlot compares the two exactly).
--
-- Every acquire, release, admission and carry of key k runs under this transaction-scoped lock,
-- so they are serial per key: a start that finds the key full and queues cannot miss a release
-- that commits meanwhile (the release waits for the queued row to commit, then admits it; or the
-- start waits for the release and finds the slot free). 1229738579 is 'ILRS', a class of its own
-- beside an application's advisory locks.
create or replace function ilr.slot_lock(k text) returns void language sql volatile as
  $$ select pg_advisory_xact_lock(1229738579, hashtext(k)) $$;

-- The NOTIFY of an admission, left out when the worker whose end released the slot serves the
-- waiter's name and version (ilr.releaser): its claim loop runs right after that commit.
create or replace function ilr.slot_notify(wf text) returns void language plpgsql as $$
begin
  if current_setting('ilr.releaser', true) is distinct from
     (select name || '@' || version from ilr.workflows where id = wf) then
    perform pg_notify('ilr_claimable', '');
  end if;
end $$;

-- When the rate (n starts per p seconds) lets the next start of key k run: the n-th newest
-- not_before of k plus p, or -infinity (no rate, or fewer than n starts). Under k's lock.
create or replace function ilr.rate_next(k text, rate jsonb) returns timestamptz language sql stable as $$
  select coalesce(
    (select s.not_before + make_interval(secs => (rate->>1)::float8)
       from ilr.slots s
      where rate is not null and s.key = k and s.not_before is not null
      order by s.not_before desc
     offset (rate->>0)::int - 1 limit 1),
    '-infinity')
$$;

-- The lowest slot number of key k free below lim, or null. PL/pgSQL, not SQL: its plan is
-- cached for the session (every keyed start runs it, from ilr.slot_take).
create or replace function ilr.slot_free(k text, lim smallint) returns smallint language plpgsql stable as $$
begin
  return (select g.s::smallint
            from generate_series(0, lim - 1) as g(s)
           where not exists (select 1 from ilr.slots
                              where key = k and slot_no = g.s and released_at is null)
           order by g.s
           limit 1);
end $$;

-- When workflow wf's concurrency key's per_key_rate lets it start, if that is later than its
-- queue's own rate lets the next start of the queue run (then taking the queue's slot now would
-- hold it for nothing), else null. Called under the queue key's lock, which every write of both
-- rate logs (not_before, ilr.slot_acquire) holds.
create or replace function ilr.rate_put_off(wf text) returns timestamptz language plpgsql as $$
declare
  w record;
  kn timestamptz;
begin
  select concurrency_key, queue, queue_rates into w from ilr.workflows where id = wf;
  if w.concurrency_key is null or w.queue_rates->'per_key_rate' is null then
    return null;
  end if;
  kn := ilr.rate_next(w.concurrency_key, w.queue_rates->'per_key_rate');
  if kn <= greatest(clock_timestamp(), ilr.rate_next('queue:' || w.queue, w.queue_rates->'rate')) then
    return null;
  end if;
  return kn;
end $$;

-- Put workflow wf off until d for key k (its queue's), under k's lock: its waiter row of k (kept,
-- or inserted) asks for the slot at d, and it waits {"kind": "rate", "until": d, "key": k}, not
-- due, until the sweep or an admission gives it the slot.
create or replace function ilr.slot_defer(wf text, k text, d timestamptz) returns void language plpgsql as $$
declare
  w record;
  lim smallint;
begin
  perform ilr.slot_lock(k);
  update ilr.slots set queued_at = d, deferred_until = d
   where workflow_id = wf and key = k and released_at is null and slot_no is null;
  if not found then
    select queue_limit, priority into w from ilr.workflows where id = wf;
    select slot_limit into lim from ilr.slots where key = k and released_at is null limit 1;
    insert into ilr.slots (key, workflow_id, slot_limit, priority, queued_at, deferred_until)
    values (k, wf, coalesce(lim, w.queue_limit), w.priority, d, d);
  end if;
  update ilr.workflows set available_at = 'infinity', updated_at = now(),
         waiting = jsonb_build_object('kind', 'rate', 'until', d, 'key', k)
   where id = wf;
end $$;

-- Admit the first waiter of key k that fits slot n, under ilr.slot_lock(k): FIFO by priority
-- (higher first), then queue time, among the waiters that have asked by now (queued_at; a put-off
-- waiter asks at its turn). A waiter of its queue's key whose concurrency key's rate would make
-- it hold the slot for nothing is put off instead (ilr.slot_defer) and the next one is tried.
-- The rest is 0016's: a workflow queued at its start goes on to its next key (ilr.slot_acquire),
-- a ctx.lock waiter becomes due at once. The waiter's row is locked, waiting for a transaction
-- that holds it (a signal to it): no transaction that locks a waiter's row then waits for a
-- key's lock (a cancel or terminate of a queued workflow takes its keys' locks before its row,
-- ilr._ops.slots.lock_keys_of; the sweep takes the key's lock before its waiters' rows), so
-- this cannot deadlock, and the first waiter is never passed over.
create or replace function ilr.slot_admit(k text, n smallint) returns text language plpgsql as $$
declare
  w record;
  t timestamptz;
  d timestamptz;
begin
  loop
    select s.id, s.workflow_id, f.concurrency_key, f.queue, f.queue_limit, f.queue_rates into w
      from ilr.slots s join ilr.workflows f on f.id = s.workflow_id
     where s.key = k and s.released_at is null and s.slot_no is null and s.slot_limit > n
       and s.queued_at <= clock_timestamp()
     order by s.priority desc, s.queued_at, s.id
     limit 1
     for update of f;
    if not found then
      return null;
    end if;
    exit when k is distinct from 'queue:' || w.queue;
    d := ilr.rate_put_off(w.workflow_id);
    exit when d is null;
    -- Its queued_at moves to d, past now: the next pass reads the next waiter.
    perform ilr.slot_defer(w.workflow_id, k, d);
  end loop;
  t := clock_timestamp();
  update ilr.slots set slot_no = n, acquired_at = t, deferred_until = null where id = w.id;
  if (k = w.concurrency_key and (w.queue_limit is not null or w.queue_rates is not null))
     or k = 'queue:' || w.queue then
    perform ilr.slot_acquire(w.workflow_id);
  else
    -- A ctx.lock waiter, or a start whose concurrency key is its only slot and which has no
    -- rate: it now holds all it needs and is due at once (what ilr.slot_acquire would find,
    -- without reading the workflow, its live row and the rate logs again).
    update ilr.workflows set available_at = t, waiting = null, updated_at = now()
     where id = w.workflow_id;
    -- available_at is later than this transaction's now(), so workflows_claimable stays
    -- silent: wake the workers here.
    perform ilr.slot_notify(w.workflow_id);
  end if;
  return w.workflow_id;
end $$;

-- Admit waiters of key k into its free slots, under k's lock, until none is free or no waiter
-- that has asked by now fits one.
create or replace function ilr.slot_fill(k text) returns void language plpgsql as $$
declare
  lim smallint;
  n smallint;
begin
  perform ilr.slot_lock(k);
  loop
    select slot_limit into lim from ilr.slots where key = k and released_at is null limit 1;
    exit when not found;
    n := ilr.slot_free(k, lim);
    exit when n is null or ilr.slot_admit(k, n) is null;
  end loop;
end $$;

-- Take a slot of key k (limit lim) for workflow wf, or queue it (a waiter row); a workflow that
-- already has a live row for k (a ctx.lock asked again after its admission) gets that row's
-- slot. Returns the slot number, or null when queued. The caller makes a queued workflow wait.
create or replace function ilr.slot_take(wf text, k text, lim smallint, prio smallint)
returns smallint language plpgsql as $$
declare
  n smallint;
  live smallint;
  t timestamptz;
begin
  -- A live row of wf for k changes only under wf's row lock, which every caller holds (the
  -- insert, the fence, the admission's FOR UPDATE): read it without k's lock, so an admission
  -- into the queue's key never takes the concurrency key's lock after it (lock order).
  select slot_no into n from ilr.slots where workflow_id = wf and key = k and released_at is null;
  if found then
    return n;
  end if;
  perform ilr.slot_lock(k);
  -- A key's limit is the one its live rows have: a start that asks another (a rule changed
  -- between deploys) joins under it, so one limit and one order hold for the key's rows.
  select slot_limit into live from ilr.slots where key = k and released_at is null limit 1;
  if found then
    lim := live;
  end if;
  n := ilr.slot_free(k, lim);
  -- A free slot is not taken past earlier waiters that fit it (FIFO; never starve). Only a
  -- waiter put off by its key's rate, whose turn came and that no sweep has admitted yet, can
  -- wait beside a free slot: admit those first (ilr.slot_fill), then look again.
  if n is not null and exists (select 1 from ilr.slots where key = k and released_at is null
                                 and slot_no is null and slot_limit > n
                                 and queued_at <= clock_timestamp()) then
    perform ilr.slot_fill(k);
    n := ilr.slot_free(k, lim);
    if n is not null and exists (select 1 from ilr.slots where key = k and released_at is null
                                   and slot_no is null and slot_limit > n
                                   and queued_at <= clock_timestamp()) then
      n := null;
    end if;
  end if;
  t := clock_timestamp();
  if n is null then
    insert into ilr.slots (key, workflow_id, slot_limit, priority, queued_at) values (k, wf, lim, prio, t);
  else
    insert into ilr.slots (key, workflow_id, slot_limit, slot_no, priority, queued_at, acquired_at)
    values (k, wf, lim, n, prio, t, t);
  end if;
  return n;
end $$;

-- Take the slots a workflow needs before it runs, in lock order (its concurrency key, then its
-- queue's key), from the first it does not hold yet: at a start (child, fork), and when a
-- release admits it into one. Queued for one: the workflow stays pending with available_at
-- 'infinity' and waiting {"kind": "slot", "key": k}, so no claim takes it until a release
-- admits it. Before its queue's key, the per-key rate: put off (ilr.rate_put_off), it takes no
-- slot of the queue and waits {"kind": "rate", "until", "key"} (ilr.slot_defer). Holding all:
-- its start time is the first the rates allow (queue's rate, the key's per_key_rate; recorded
-- as not_before on both rows, the rates' log), and it is due then. Returns true when it holds
-- them all.
--
-- The race: the put-off decision reads both rate logs and the queue's waiters under the queue
-- key's lock, taken here before ilr.rate_put_off (after the concurrency key's, the lock order),
-- and every write that changes what it reads holds that lock too: a not_before is written below
-- under it (the caller took it in ilr.slot_take, or ilr.slot_admit runs under it), a release or
-- admission of the queue's key takes it, and the sweep takes it before it admits a put-off row.
-- So a start is put off against a log no other start is appending to, and a release that
-- commits meanwhile either comes first (this start then sees the slot free and takes it, or is
-- put off and the sweep admits it at its turn) or waits for this transaction and then sees the
-- put-off row, which it passes over only while its turn has not come (queued_at > now).
create or replace function ilr.slot_acquire(wf text) returns boolean language plpgsql as $$
declare
  w record;
  q text;
  n smallint;
  d timestamptz;
  t timestamptz;
  nb timestamptz;
begin
  select id, concurrency_key, concurrency_limit, queue, queue_limit, queue_rates, priority into w
    from ilr.workflows where id = wf;
  if w.concurrency_key is not null and w.concurrency_limit is not null
     and ilr.slot_take(wf, w.concurrency_key, w.concurrency_limit, w.priority) is null then
    update ilr.workflows set available_at = 'infinity', updated_at = now(),
           waiting = jsonb_build_object('kind', 'slot', 'key', w.concurrency_key)
     where id = wf;
    return false;
  end if;
  if w.queue_limit is not null then
    q := 'queue:' || w.queue;
    select slot_no into n from ilr.slots where workflow_id = wf and key = q and released_at is null;
    if found and n is null then
      return false;  -- already queued or put off for the queue's key: its row says so
    end if;
    if not found then
      perform ilr.slot_lock(q);
      d := ilr.rate_put_off(wf);
      if d is not null then
        perform ilr.slot_defer(wf, q, d);
        return false;
      end if;
      if ilr.slot_take(wf, q, w.queue_limit, w.priority) is null then
        update ilr.workflows set available_at = 'infinity', updated_at = now(),
               waiting = jsonb_build_object('kind', 'slot', 'key', q)
         where id = wf;
        return false;
      end if;
    end if;
  end if;
  t := clock_timestamp();
  -- No rates: the rate logs are not read (two lookups per start and per admission saved).
  nb := t;
  if w.queue_rates is not null then
    nb := greatest(t,
                   ilr.rate_next('queue:' || w.queue, w.queue_rates->'rate'),
                   ilr.rate_next(w.concurrency_key, case when w.concurrency_key is not null
                                                         then w.queue_rates->'per_key_rate' end));
    update ilr.slots set not_before = nb
     where workflow_id = wf and released_at is null
       and key in (w.concurrency_key, 'queue:' || w.queue);
  end if;
  update ilr.workflows
     set available_at = nb, updated_at = now(),
         waiting = case when nb > t then jsonb_build_object('kind', 'rate', 'until', nb) end
   where id = wf;
  -- available_at is later than this transaction's now(), so workflows_claimable stays silent.
  if nb = t then
    perform ilr.slot_notify(wf);
  end if;
  return true;
end $$;

-- The sweep: every key with a put-off row whose turn has come, in key order, under its lock
-- (the lock order: keys, then the queued workflows' rows): the row's deferred_until is cleared
-- (from now on it waits by priority and queued_at, its turn, like any waiter; its workflow
-- waits {"kind": "slot"}), and waiters are admitted into the key's free slots. Run by every
-- worker's claim loop (ilr._worker.worker, at most every SLOT_WAKE_EVERY seconds); two sweeps
-- serialize on the key's lock, the second finds nothing. Returns the rows whose turn came.
create or replace function ilr.slot_wake() returns integer language plpgsql as $$
declare
  k text;
  r record;
  t timestamptz := clock_timestamp();  -- a value, not a volatile call: slots_deferred serves the scan
  woken integer := 0;
begin
  for k in select distinct s.key from ilr.slots s
            where s.deferred_until <= t and s.released_at is null
            order by s.key loop
    perform ilr.slot_lock(k);
    for r in update ilr.slots set deferred_until = null
              where key = k and released_at is null and slot_no is null
                and deferred_until <= clock_timestamp()
             returning workflow_id loop
      update ilr.workflows set waiting = jsonb_build_object('kind', 'slot', 'key', k), updated_at = now()
       where id = r.workflow_id and status = 'pending' and waiting->>'kind' = 'rate';
      woken := woken + 1;
    end loop;
    perform ilr.slot_fill(k);
  end loop;
  return woken;
end $$;

-- Release workflow wf's live row for key k (why: 'unlocked' at a ctx.lock block's end,
-- 'continued', 'revoked by <who>') and admit a waiter into its slot. Returns whether a live row
-- was released.
create or replace function ilr.slot_unlock(wf text, k text, why text) returns boolean language plpgsql as $$
declare
  n smallint;
begin
  perform ilr.slot_lock(k);
  update ilr.slots set released_at = clock_timestamp(), released_why = why
   where workflow_id = wf and key = k and released_at is null
  returning slot_no into n;
  if not found then
    return false;
  end if;
  if n is not null then
    perform ilr.slot_admit(k, n);
  end if;
  return true;
end $$;

-- Release every live row of workflow wf (why: its end status, or 'cancelled' for a waiter) and
-- admit a waiter into each freed slot, in one transaction with the write that ended it. Keys in
-- lock order (its concurrency key, its queue's, then ctx.lock keys by name), the order in which
-- every acquire takes them, so no two transactions wait on each other's key locks crosswise.
create or replace function ilr.slot_release(wf text, why text) returns void language plpgsql as $$
declare
  k text;
  r record;
begin
  for k in select s.key from ilr.slots s join ilr.workflows w on w.id = s.workflow_id
            where s.workflow_id = wf and s.released_at is null
            order by s.key is distinct from w.concurrency_key, s.key is distinct from 'queue:' || w.queue,
                     s.key loop
    perform ilr.slot_lock(k);
    for r in update ilr.slots set released_at = clock_timestamp(), released_why = why
              where workflow_id = wf and key = k and released_at is null
             returning slot_no loop
      if r.slot_no is not null then
        perform ilr.slot_admit(k, r.slot_no);
      end if;
    end loop;
  end loop;
end $$;

-- Continue-as-new: the successor takes over its predecessor's live row of key k (its concurrency
-- key or its queue's; the trigger calls this for each), slot number kept, in the transaction that inserts it (the predecessor's interval ends when the
-- successor's begins). ctx.lock slots are not carried: the run left its blocks, and its status
-- change to 'continued' releases them.
create or replace function ilr.slot_carry(from_wf text, to_wf text, k text) returns void language plpgsql as $$
declare
  r record;
  t timestamptz;
begin
  for r in select * from ilr.slots
            where workflow_id = from_wf and key = k and released_at is null loop
    perform ilr.slot_lock(r.key);
    t := clock_timestamp();
    update ilr.slots set released_at = t, released_why = 'continued' where id = r.id;
    insert into ilr.slots (key, workflow_id, slot_limit, slot_no, priority, queued_at, acquired_at)
    values (r.key, to_wf, r.slot_limit, r.slot_no, r.priority, r.queued_at,
            case when r.slot_no is null then null else t end);
    -- not_before stays on the predecessor's row: the chain started once, under the rates.
    update ilr.workflows set available_at = greatest(available_at, t) where id = to_wf;
  end loop;
end $$;

-- The triggers: every path that inserts a workflow (start, child, fork, continue-as-new) or ends
-- one (the fenced end, a cancelled waiter) acquires or releases here, so no path can forget.
-- They fire only for rows with a key, a limited or rated queue, or a ctx.lock slot (the WHEN
-- clause costs the others nothing).
create or replace function ilr.workflows_slots() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    if new.continued_from is not null then
      perform ilr.slot_carry(new.continued_from, new.id, new.concurrency_key);
      perform ilr.slot_carry(new.continued_from, new.id, 'queue:' || new.queue);
    else
      perform ilr.slot_acquire(new.id);
    end if;
  elsif new.status in ('completed', 'failed', 'cancelled', 'terminated') then
    -- Stuck is not among them: a stuck workflow waits for a person to resume it, and a resumed
    -- run replays from its history, which says it holds its slots; so it keeps them.
    if old.status = 'running' then
      perform set_config('ilr.releaser', new.name || '@' || new.version, true);
    end if;
    perform ilr.slot_release(new.id, new.status);
  elsif new.status = 'continued' then
    -- The run left its ctx.lock blocks; the successor's insert carries the run's own slots.
    perform ilr.slot_unlock(new.id, s.key, 'continued')
       from ilr.slots s
      where s.workflow_id = new.id and s.released_at is null
        and s.key is distinct from new.concurrency_key and s.key is distinct from 'queue:' || new.queue
      order by s.key;
  end if;
  return null;
end $$;
create or replace trigger workflows_slots_insert after insert on ilr.workflows
  for each row when (new.concurrency_key is not null or new.queue_limit is not null)
  execute function ilr.workflows_slots();
create or replace trigger workflows_slots_status after update of status on ilr.workflows
  for each row when ((new.concurrency_key is not null or new.queue_limit is not null or new.holds_locks)
                     and old.status is distinct from new.status
                     and new.status in ('completed', 'failed', 'cancelled', 'terminated', 'continued'))
  execute function ilr.workflows_slots();

-- A keyed or queued start announces itself from ilr.slot_acquire once it holds its slots (a
-- queued one is not claimable): the insert's own NOTIFY is for the others only.
create or replace trigger workflows_claimable after update of status, available_at on ilr.workflows
  for each row when (new.status in ('pending', 'sleeping') and new.available_at <= now())
  execute function ilr.notify_claimable();
create or replace trigger workflows_claimable_insert after insert on ilr.workflows
  for each row when (new.status in ('pending', 'sleeping') and new.available_at <= now()
                     and new.concurrency_key is null and new.queue_limit is null)
  execute function ilr.notify_claimable();

-- Schedules (docs/protocol.md §5.8): ilr.schedules, the spec and the next tick of each; ilr.schedule_ticks,
-- every tick a schedule met and what it did (started, buffered, skipped, missed).
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
  ticks_pruned_through timestamptz,            -- the newest tick whose row was pruned (0020)
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
