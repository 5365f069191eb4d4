-- Fast paths of the slot functions (docs/protocol.md §5.4), behaviour unchanged: the keyed
-- start's and end's work in PostgreSQL, measured by `manage.py bench --keys` (results/keys_bench.md).
--
-- * ilr.slot_acquire reads the rate logs (ilr.rate_next, twice) only for a workflow with rates.
-- * ilr.slot_admit makes a waiter whose concurrency key is its only slot, and which has no rate,
--   due at once, as it does a ctx.lock waiter, instead of calling ilr.slot_acquire, which would
--   read the workflow and its live row again to find the same.
-- * The status trigger fires only for the statuses it acts on (an end, continue-as-new): a
--   claim's pending -> running and a suspend's running -> sleeping no longer call it.

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

drop trigger if exists workflows_slots_status on ilr.workflows;
create trigger workflows_slots_status after update of status on ilr.workflows
  for each row when ((new.concurrency_key is not null or new.queue_limit is not null or new.holds_locks)
                     and old.status is distinct from new.status
                     and new.status in ('completed', 'failed', 'cancelled', 'terminated', 'continued'))
  execute function ilr.workflows_slots();
