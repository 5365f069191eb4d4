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
