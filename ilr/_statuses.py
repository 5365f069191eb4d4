"""The status vocabulary of a workflow, in a leaf module every other one may import.

A workflow is ACTIVE (pending, running or sleeping) until it ends in one of the TERMINAL statuses
(completed, failed, cancelled, terminated, stuck) or hands over to its successor (continued). The values are
the ``ilr.workflows.status`` column's, so a WorkflowStatus compares equal to the text a query
returns.
"""

from __future__ import annotations

from enum import StrEnum


class WorkflowStatus(StrEnum):
    """A workflow's status (docs/protocol.md §1)."""

    PENDING = "pending"
    RUNNING = "running"
    SLEEPING = "sleeping"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STUCK = "stuck"
    CONTINUED = "continued"
    TERMINATED = "terminated"


STATUSES: tuple[str, ...] = tuple(s.value for s in WorkflowStatus)
"""Every status, in the order above."""
ACTIVE: tuple[str, ...] = ("pending", "running", "sleeping")
"""Statuses of a workflow that has not ended: a version is drained when it has none."""
TERMINAL: tuple[str, ...] = ("completed", "failed", "cancelled", "stuck", "terminated")
"""Statuses a workflow ends in (``continued`` hands over instead)."""
