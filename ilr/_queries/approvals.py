"""Statements on ilr.approval_requests: asking, deciding and settling approval requests."""

from __future__ import annotations

APPROVE_REQUEST_IN_UPDATE_APPROVAL_REQUESTS = (
    "update ilr.approval_requests set approvals = %s::jsonb, status = 'approved', grant_id = %s, "
    "decided_by = %s, decided_at = clock_timestamp() where id = %s"
)
"""Set approvals, decided_at, decided_by, grant_id, status on ilr.approval_requests
(``_ops.approval_requests.approve_request_in``)."""

REJECT_REQUEST_IN_UPDATE_APPROVAL_REQUESTS = (
    "update ilr.approval_requests set status = 'rejected', decided_by = %s, reason = %s, decided_at = "
    "clock_timestamp() where id = %s"
)
"""Set decided_at, decided_by, reason, status on ilr.approval_requests
(``_ops.approval_requests.reject_request_in``)."""

APPROVE_REQUEST_IN_UPDATE_APPROVAL_REQUESTS_2 = "update ilr.approval_requests set approvals = %s::jsonb where id = %s"
"""Set approvals on ilr.approval_requests (``_ops.approval_requests.approve_request_in``)."""

OPEN_FOR_DECISION_SELECT_APPROVAL_REQUESTS = "select workflow_id from ilr.approval_requests where id = %s"
"""Read from ilr.approval_requests (``_ops.approval_requests._open_for_decision``)."""


# -- from _ops/approval_requests.py -------------------------------------------------------------

FENCED = (
    "with f as (update ilr.workflows set lease_expires_at = now() + make_interval(secs => %(ttl)s), "
    "updated_at = now() where id = %(wf)s and epoch = %(epoch)s and status = 'running' "
    "and lease_expires_at > now() returning id) "
)
"""The fence ahead of an approval request's write, as a CTE: the claim must be current; it locks the
workflow row first (the order approve and reject take too) and renews the lease."""

INSERT_APPROVAL_REQUEST_SQL = FENCED + (
    "insert into ilr.approval_requests (id, workflow_id, seq, target, action, effect_key, payload, payload_hash, "
    "amount_cents, premises, decision, summary, approvals_needed, expires_at) select %(id)s, f.id, %(seq)s, "
    "%(target)s, %(action)s, %(key)s, %(payload)s::jsonb, %(hash)s, %(amount)s, %(premises)s::jsonb, "
    "%(decision)s::jsonb, %(summary)s, %(needed)s, now() + make_interval(secs => %(timeout)s) from f "
    "on conflict (id) do nothing"
)
"""Insert an approval request, fenced (``_context.effects.WorkflowContext.request_approval``).
Idempotent on the id: a re-run after a crash writes nothing new, and the first row (its premises
included) is the request. A lost claim writes nothing."""

SETTLE_APPROVAL_REQUEST_SQL = FENCED + (
    "update ilr.approval_requests r set status = %(ended)s, decided_by = '$workflow', reason = %(reason)s, "
    "decided_at = clock_timestamp() from f where r.id = %(id)s and r.status = 'pending'"
)
"""End a pending approval request from its workflow (expired or cancelled), fenced as above; a
request decided meanwhile is left as it is (``_ops.approval_requests.settle_request_in``)."""


# -- reads of approval requests (from _ops.approval_requests) ------------------------------------

COLUMNS = (
    "id, workflow_id, seq, target, action, effect_key, payload, payload_hash, amount_cents, premises, "
    "decision, summary, approvals_needed, approvals, status, grant_id, decided_by, reason, requested_at, "
    "expires_at, decided_at"
)
"""Every column of an approval request, as ``get_in`` and ``list_in`` return it."""

GET_APPROVAL_REQUEST_SQL = f"select {COLUMNS} from ilr.approval_requests where id = %s"
"""Read one approval request (``_ops.approval_requests.get_in``)."""

LOCK_APPROVAL_REQUEST_SQL = GET_APPROVAL_REQUEST_SQL + " for update"
"""Lock and read one approval request before deciding it (``_ops.approval_requests.get_in``)."""

LIST_APPROVAL_REQUESTS_BY_STATUS_SQL = (
    f"select {COLUMNS} from ilr.approval_requests where status = %s order by requested_at, id limit %s"
)
"""Approval requests with one status, oldest first (``_ops.approval_requests.list_in``)."""

LIST_APPROVAL_REQUESTS_SQL = (
    f"select {COLUMNS} from ilr.approval_requests where %s::text is null order by requested_at, id limit %s"
)
"""Every approval request, oldest first; its first parameter is None (``_ops.approval_requests.list_in``)."""

WITHDRAW_PENDING_OF_WORKFLOW = (
    "update ilr.approval_requests set status = 'cancelled', decided_by = %s, reason = %s, "
    "decided_at = clock_timestamp() where workflow_id = %s and status = 'pending' returning id"
)
"""Withdraw a terminated workflow's pending approval requests (``_ops.lifecycle.terminate_in``)."""
