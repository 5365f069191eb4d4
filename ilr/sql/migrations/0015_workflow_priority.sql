-- Priority (docs/protocol.md §3.1): among due workflows, a higher priority is claimed first; ties
-- go oldest first. Most rows keep priority 0 and stay in wf_due alone; the rows with another
-- priority (Django tasks enqueued with one, ilr.tasks) are also in wf_due_priority, which the
-- claim scans before (priority > 0) and after (priority < 0) wf_due. Adding a column with a
-- constant default rewrites no rows.
alter table ilr.workflows add column if not exists priority smallint not null default 0;
alter table ilr.workflows drop constraint if exists workflows_priority_range;
alter table ilr.workflows add constraint workflows_priority_range check (priority between -100 and 100);
create index if not exists wf_due_priority on ilr.workflows (priority desc, available_at)
  where status in ('pending','sleeping') and priority <> 0;
