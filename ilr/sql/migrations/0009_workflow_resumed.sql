-- Who last resumed a stuck workflow, and when (Runtime.resume, resume_in): an operator's way
-- back from stuck. Both are set together by each resume (the latest one wins; the admin's
-- LogEntry keeps every one); null for a workflow never resumed.
alter table ilr.workflows add column if not exists resumed_by text;
alter table ilr.workflows add column if not exists resumed_at timestamptz;
alter table ilr.workflows add constraint workflows_resumed_by_with_at
  check ((resumed_by is null) = (resumed_at is null));
