"""Statements on no one table: session settings, notifications, server facts."""

from __future__ import annotations

NOW_FROM_DB_SELECT_SQL = "select to_jsonb(now()) as n"
"""Read (``_context.context.WorkflowContext.now_from_db``)."""

SUSPEND_SELECT_SQL = (
    "select to_jsonb(d) as until, d <= now() as due, to_jsonb(now()) as now from (select "
    "coalesce(%s::timestamptz, now() + make_interval(secs => %s)) as d) x"
)
"""Read (``_db.store.suspend``)."""

WAIT_CHILD_SELECT_SQL = (
    "select to_jsonb(d) as until, d <= now() as due from (select coalesce(%s::timestamptz, now() + "
    "make_interval(secs => %s)) as d) x"
)
"""Read (``_db.store.wait_child``)."""

LOST_DISPATCH_SELECT_SQL = "select now() < %s as early"
"""Read (``_effects.dispatch._lost_dispatch``)."""


OPEN_FOR_DECISION_SELECT_SQL = "select clock_timestamp() < %s as live"
"""Read (``_ops.approval_requests._open_for_decision``)."""

APPROVE_REQUEST_IN_SELECT_SQL = "select clock_timestamp() as t"
"""Read (``_ops.approval_requests.approve_request_in``)."""

TAKE_WORKER_ID_SELECT_SQL = "select pg_terminate_backend(%s)"
"""Read (``_worker.deployments.take_worker_id``)."""

READ_LEDGER_SELECT_SQL = "select * from refunds order by seq"
"""Read (``management.commands.ilr_check._read_ledger``)."""
