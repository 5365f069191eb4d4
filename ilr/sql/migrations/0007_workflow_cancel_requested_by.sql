-- Who requested a workflow's cancel. rt.cancel and cancel_in take `by`, but only
-- cancel_requested_at was stored. Set once, with cancel_requested_at (the first cancel wins);
-- null for a cancel that named no one and for cancels before this migration.
alter table ilr.workflows add column if not exists cancel_requested_by text;
alter table ilr.workflows add constraint workflows_cancel_requested_by_with_at
  check (cancel_requested_by is null or cancel_requested_at is not null);
