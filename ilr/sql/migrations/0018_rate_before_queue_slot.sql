-- Rates before the queue's slot (docs/protocol.md §5.4): a start that its concurrency key's
-- per_key_rate puts off does not hold its queue's slot while it waits.
--
-- Before: a workflow took its concurrency key, then its queue's key, and only then read the rates
-- (ilr.slot_acquire of 0016); a start that its key's per_key_rate delayed held one of the queue's
-- `concurrency` slots until its turn, and a queue of concurrency N had its slots taken by
-- workflows that were only waiting, while other keys' starts, which their own rate would let
-- run now, queued behind them.
--
-- Now, at the moment a workflow would take its queue's slot (at its start, when a release admits
-- it into its concurrency key, or when a release of the queue's key would admit it), the per-key
-- rate is read first: when it gives a time later than the queue's own rate gives now, the
-- workflow is put off (ilr.slot_defer): its row of the queue's key is a waiter with queued_at =
-- deferred_until = that turn, holding no slot, and the admission moves on to the next waiter.
-- The sweep (ilr.slot_wake, run by every worker's claim loop) clears deferred_until when the turn
-- comes and admits into free slots; from then on the row waits by priority and queued_at like
-- any waiter (queued_at is when it asked for the queue's slot: its turn).
--
-- The queue's own rate is still read after the queue's slot is taken, and a workflow waits for
-- that turn holding the slot (waiting {"kind": "rate", "until"} without a key): the queue's rate
-- log only grows at its end (each not_before is greatest(now, rate_next) under the queue key's
-- lock, and rate_next never decreases), so every workflow that takes the slot later gets a turn
-- no earlier than this one's; holding it keeps nobody from running sooner.
--
-- ilr.slots.deferred_until: set on a waiter of a queue's key that its key's rate put off, until
-- the sweep (or a release's admission, which reads queued_at) finds its turn come.
alter table ilr.slots add column if not exists deferred_until timestamptz;
-- The sweep's work: rows put off, by their turn.
create index if not exists slots_deferred on ilr.slots (deferred_until)
  where deferred_until is not null and released_at is null;

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
    select s.id, s.workflow_id, f.concurrency_key, f.queue into w
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
