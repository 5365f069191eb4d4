-- Flow control (docs/protocol.md §5.4, §5.5): concurrency keys, queues, ctx.lock, deduplication.
--
-- A workflow started with a concurrency key holds one of the key's `limit` slots from its start
-- (or its admission) until it completes, fails or is cancelled (a stuck workflow keeps it until
-- it is resumed and ends); a workflow of a queue with a concurrency limit or a rate holds a slot
-- of the queue's key, 'queue:<name>', the same way. The slot belongs to the workflow, not to a
-- worker: it is held through sleeps, signal and approval waits without a claim, kept across
-- takeovers (the release is written by the fenced end), carried by continue-as-new. ilr.slots
-- keeps every holder and waiter, released rows included, so the checks (SlotMutex,
-- NoRunWithoutSlot, SlotFifo, RateRespected) read the history from the database's own record.
alter table ilr.workflows add column if not exists concurrency_key text;
alter table ilr.workflows add column if not exists concurrency_limit smallint;
alter table ilr.workflows drop constraint if exists workflows_concurrency;
alter table ilr.workflows add constraint workflows_concurrency check (
  (concurrency_key is null) = (concurrency_limit is null) and concurrency_limit between 1 and 1000);
-- The queue (ILR_QUEUES) and its rule as the start read it: queue_limit, the slots of its key
-- (1000 when it has a rate and no limit); queue_rates {"rate": [n, seconds], "per_key_rate":
-- [n, seconds]}.
alter table ilr.workflows add column if not exists queue text;
alter table ilr.workflows add column if not exists queue_limit smallint;
alter table ilr.workflows add column if not exists queue_rates jsonb;
alter table ilr.workflows drop constraint if exists workflows_queue;
alter table ilr.workflows add constraint workflows_queue check (
  (queue_limit is null or queue is not null) and queue_limit between 1 and 1000);
-- Set once the workflow took a ctx.lock slot: its end (or continue-as-new) then releases it.
alter table ilr.workflows add column if not exists holds_locks boolean not null default false;
-- A ctx.lock block's enter and exit are recorded as steps of kind 'lock'.
alter table ilr.steps drop constraint if exists steps_kind_check;
alter table ilr.steps add constraint steps_kind_check check (
  kind in ('step','decide','effect','sleep','signal','patch','child','lock'));

-- Deduplication (rt.start(dedup_key=, dedup_window=)): a start finds the newest workflow of its
-- key started inside its window by this index, under an advisory lock on the key.
alter table ilr.workflows add column if not exists dedup_key text;
create index if not exists wf_dedup on ilr.workflows (dedup_key, created_at desc) where dedup_key is not null;

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

-- Admit the first waiter of key k that fits slot n, under ilr.slot_lock(k): FIFO by priority
-- (higher first), then queue time. A workflow queued at its start goes on to its next key
-- (ilr.slot_acquire: its queue's, then the rates), and becomes due when it holds them all; a
-- ctx.lock waiter becomes due at once. The waiter's row is locked, waiting for a transaction
-- that holds it (a signal to it): no transaction that locks a waiter's row then waits for a
-- key's lock, since a cancel or terminate of a queued workflow takes its keys' locks before its
-- row (ilr._ops.slots.lock_keys_of), so this cannot deadlock, and the first waiter is never
-- passed over. The NOTIFY is left out when the worker whose end released the slot serves the
-- waiter's name and version (ilr.releaser): its claim loop runs right after that commit.
create or replace function ilr.slot_notify(wf text) returns void language plpgsql as $$
begin
  if current_setting('ilr.releaser', true) is distinct from
     (select name || '@' || version from ilr.workflows where id = wf) then
    perform pg_notify('ilr_claimable', '');
  end if;
end $$;

create or replace function ilr.slot_admit(k text, n smallint) returns text language plpgsql as $$
declare
  w record;
  t timestamptz;
begin
  select s.id, s.workflow_id, f.concurrency_key, f.queue into w
    from ilr.slots s join ilr.workflows f on f.id = s.workflow_id
   where s.key = k and s.released_at is null and s.slot_no is null and s.slot_limit > n
   order by s.priority desc, s.queued_at, s.id
   limit 1
   for update of f;
  if not found then
    return null;
  end if;
  t := clock_timestamp();
  update ilr.slots set slot_no = n, acquired_at = t where id = w.id;
  if k = w.concurrency_key or k = 'queue:' || w.queue then
    perform ilr.slot_acquire(w.workflow_id);
  else
    update ilr.workflows set available_at = t, waiting = null, updated_at = now()
     where id = w.workflow_id;
    -- available_at is later than this transaction's now(), so workflows_claimable stays
    -- silent: wake the workers here.
    perform ilr.slot_notify(w.workflow_id);
  end if;
  return w.workflow_id;
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
  select g.s into n
    from generate_series(0, lim - 1) as g(s)
   where not exists (select 1 from ilr.slots
                      where key = k and slot_no = g.s and released_at is null)
   order by g.s
   limit 1;
  -- A free slot is not taken past earlier waiters that fit it (FIFO; never starve).
  if n is not null and exists (select 1 from ilr.slots where key = k and released_at is null
                                 and slot_no is null and slot_limit > n) then
    n := null;
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

-- Take the slots a workflow needs before it runs, in lock order (its concurrency key, then its
-- queue's key), from the first it does not hold yet: at a start (child, fork), and when a
-- release admits it into one. Queued for one: the workflow stays pending with available_at
-- 'infinity' and waiting {"kind": "slot", "key": k}, so no claim takes it until a release
-- admits it. Holding all: its start time is the first the rates allow (queue's rate, the key's
-- per_key_rate; recorded as not_before on both rows, the rates' log), and it is due then.
-- Returns true when it holds them all.
create or replace function ilr.slot_acquire(wf text) returns boolean language plpgsql as $$
declare
  w record;
  k text;
  lim smallint;
  t timestamptz;
  nb timestamptz;
begin
  select id, concurrency_key, concurrency_limit, queue, queue_limit, queue_rates, priority into w
    from ilr.workflows where id = wf;
  for k, lim in select * from (values (w.concurrency_key, w.concurrency_limit),
                                       ('queue:' || w.queue, w.queue_limit)) as v(k, lim)
                 where v.k is not null and v.lim is not null loop
    if ilr.slot_take(wf, k, lim, w.priority) is null then
      update ilr.workflows set available_at = 'infinity', updated_at = now(),
             waiting = jsonb_build_object('kind', 'slot', 'key', k)
       where id = wf;
      return false;
    end if;
  end loop;
  t := clock_timestamp();
  nb := greatest(t,
                 ilr.rate_next('queue:' || w.queue, w.queue_rates->'rate'),
                 ilr.rate_next(w.concurrency_key, case when w.concurrency_key is not null
                                                       then w.queue_rates->'per_key_rate' end));
  if w.queue_rates is not null then
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
  elsif new.status in ('completed', 'failed', 'cancelled') then
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
                     and old.status is distinct from new.status)
  execute function ilr.workflows_slots();

-- A keyed or queued start announces itself from ilr.slot_acquire once it holds its slots (a
-- queued one is not claimable): the insert's own NOTIFY is for the others only.
drop trigger if exists workflows_claimable on ilr.workflows;
create or replace trigger workflows_claimable after update of status, available_at on ilr.workflows
  for each row when (new.status in ('pending', 'sleeping') and new.available_at <= now())
  execute function ilr.notify_claimable();
create or replace trigger workflows_claimable_insert after insert on ilr.workflows
  for each row when (new.status in ('pending', 'sleeping') and new.available_at <= now()
                     and new.concurrency_key is null and new.queue_limit is null)
  execute function ilr.notify_claimable();
