-- Wakeups (issue 9): a row that becomes due now announces itself on channel ilr_claimable, so
-- idle workers claim at once instead of at their next poll. Polling stays the fallback (timers
-- coming due, lapsed leases, a lost notification). Notifications of one transaction with the
-- same payload are delivered once, so a batch insert wakes each listener once.
create or replace function ilr.notify_claimable() returns trigger language plpgsql as
  $$ begin perform pg_notify('ilr_claimable', ''); return null; end $$;
create or replace trigger workflows_claimable after insert or update of status, available_at on ilr.workflows
  for each row when (new.status in ('pending', 'sleeping') and new.available_at <= now())
  execute function ilr.notify_claimable();
