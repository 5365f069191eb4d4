"""Statements on ilr.signals: sending, consuming and waking on signals."""

from __future__ import annotations

SUSPEND_UPDATE_SIGNALS = "update ilr.signals set consumed_seq = %s where id = %s"
"""Set consumed_seq on ilr.signals (``_db.store.suspend``)."""

SUSPEND_LOCK_SIGNALS = (
    "select id, payload from ilr.signals where workflow_id = %s and name = %s and consumed_seq is null "
    "order by id limit 1 for update"
)
"""Lock and read rows of ilr.signals (``_db.store.suspend``)."""

WAKE_INSERT_SIGNALS = "insert into ilr.signals (workflow_id, name, payload, sender) values (%s, %s, %s::jsonb, %s)"
"""Insert into ilr.signals (``_ops.approval_requests._wake``)."""

APPROVE_IN_INSERT_SIGNALS = (
    "insert into ilr.signals (workflow_id, name, payload, sender) values (%s, 'approve', %s::jsonb, %s)"
)
"""Insert into ilr.signals (``_ops.grants.approve_in``)."""

APPROVE_IN_SELECT_SIGNALS = (
    "select id from ilr.signals where workflow_id = %s and name = 'approve' and consumed_seq is null limit 1"
)
"""Read from ilr.signals (``_ops.grants.approve_in``)."""

DESCRIBE_ON_SELECT_SIGNALS = "select * from ilr.signals where workflow_id = %s order by id"
"""Read from ilr.signals (``_ops.reads.describe_on``)."""

SIGNAL_IN_INSERT_SIGNALS = (
    "insert into ilr.signals (workflow_id, name, payload, sender) values (%s, %s, %s::jsonb, %s) returning id"
)
"""Insert into ilr.signals (``_ops.workflow_ops.signal_in``)."""

MOVE_TO_SUCCESSOR = "update ilr.signals set workflow_id = %s where workflow_id = %s and consumed_seq is null"
"""Hand a run's unconsumed signals to its successor, ids (their order) kept, in the
continue-as-new transaction (``_db.lineage.continue_as_new``)."""
