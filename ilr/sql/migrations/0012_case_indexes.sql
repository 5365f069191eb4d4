-- The review UI's case list and the admin's outcome filter (approvals/cases.py) ask, per
-- workflow, whether an approval request is pending and whether an effect was refused or is
-- ambiguous (requests by workflow use the (workflow_id, seq) unique index), and the case page
-- reads a workflow's effects; the receipt page finds the request that issued a grant. The
-- effect index costs an effect's insert one index entry.
create index if not exists effects_by_workflow on ilr.effects (workflow_id);
create index if not exists approval_requests_by_grant on ilr.approval_requests (grant_id)
  where grant_id is not null;
