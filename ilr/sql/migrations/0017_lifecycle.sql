-- Lifecycle (docs/protocol.md §5.3, §5.6): terminate, and a child's parent close policy.
--
-- 'terminated': ended by rt.terminate, at once, without compensation. A child's
-- parent_close_policy ('request_cancel', 'abandon', 'terminate'; null for a top-level workflow)
-- says what its parent's end (completed, failed, cancelled, terminated) does to it. wf_children
-- finds a workflow's children (the policy, a cancel's tree, describe()).
alter table ilr.workflows drop constraint if exists workflows_status_check;
alter table ilr.workflows add constraint workflows_status_check check (status in
  ('pending','running','sleeping','completed','failed','cancelled','stuck','continued','terminated'));
alter table ilr.workflows add column if not exists parent_close_policy text;
alter table ilr.workflows drop constraint if exists workflows_parent_close_policy;
alter table ilr.workflows add constraint workflows_parent_close_policy check (
  parent_close_policy is null or (parent_close_policy in ('request_cancel', 'abandon', 'terminate') and parent_id is not null));
create index if not exists wf_children on ilr.workflows (parent_id) where parent_id is not null;

-- A terminated workflow releases its slots as a completed one does (docs/protocol.md §5.4).
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
