"""Ending a workflow from outside and what it does to its children: ``terminate_in`` and the
parent close policies (docs/protocol.md §5.6).

A child started with ``ctx.child(..., parent_close_policy=...)`` keeps the policy on its row:
"request_cancel" (the default: its cancel is requested, so its compensation runs and its pending
approval requests are withdrawn), "terminate", or "abandon" (left running). The policy applies
when the parent completes, fails, is cancelled or is terminated; along a child's continue-as-new
chain it reaches the chain's current run. Lock order: the parent's row before its children's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr._codec import check_workflow_id
from ilr._errors import InvalidInput
from ilr._ops.slots import lock_keys_of
from ilr._ops.workflow_ops import _cancel_tree, _lock_current_run, _lock_workflow
from ilr._queries.approvals import WITHDRAW_PENDING_OF_WORKFLOW
from ilr._queries.workflows import (
    ACTIVE_CHILDREN,
    CANCEL_IN_WITH_WORKFLOWS,
    PARENT_OF_SELECT_WORKFLOWS,
    TERMINATE_UPDATE_WORKFLOWS,
    WAKE_PARENT_UPDATE_WORKFLOWS,
)
from ilr._statuses import TERMINAL

PARENT_CLOSE_POLICIES = ("request_cancel", "abandon", "terminate")
"""What a parent's end does to a child: request its cancel (the default), leave it, terminate it."""


def check_parent_close_policy(policy: Any) -> str:
    """``policy`` when it is one of PARENT_CLOSE_POLICIES; else InvalidInput naming
    "parent_close_policy"."""
    if policy not in PARENT_CLOSE_POLICIES:
        raise InvalidInput("parent_close_policy", f"must be one of {', '.join(PARENT_CLOSE_POLICIES)}, got {policy!r}")
    return policy


@dataclass(frozen=True)
class TerminateRequest:
    """What a terminate did.

    Attributes:
        terminated: True when this call ended the workflow; False when it had ended already.
            The object's truth value.
        may_still_land: ids of the effects in state dispatched under it or the children it
            ended (sorted): their sends were authorized before and may land.
        children: {child id: "cancel requested" | "terminated" | "abandoned"}, by policy.
    """

    terminated: bool
    may_still_land: tuple[str, ...] = ()
    children: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.terminated


def terminate_in(conn, wf_id: str, reason: str, by: str) -> TerminateRequest:
    """Terminate ``wf_id`` (its current run, following continue-as-new) inside the caller's
    transaction: it ends ``terminated`` now, with no compensation; its pending approval requests
    are withdrawn, its slots released, a parent waiting on it woken, and its children handled by
    their parent close policies. A worker running it finds it no longer running at its next
    fenced write and abandons the run; a send already authorized may still land (listed).

    Raises:
        InvalidInput: a bad id, ``reason`` or ``by`` (each naming its field).
        WorkflowNotFound: no workflow has this id.
    """
    check_workflow_id(wf_id)
    codec.check_text(reason, "reason")
    codec.check_who(by)
    cur = conn.cursor(row_factory=dict_row)
    row = cur.execute(PARENT_OF_SELECT_WORKFLOWS, (wf_id,)).fetchone()
    if row is not None and row["parent_id"]:
        _lock_workflow(cur, row["parent_id"])  # parent first: the terminated child wakes it
    lock_keys_of(cur, wf_id)  # its keys before its row: it may be queued (ilr._ops.slots)
    wf = _lock_current_run(cur, wf_id)
    children: dict[str, str] = {}
    if not _terminate_locked(cur, wf, reason, by, children):
        return TerminateRequest(False)
    landing = cur.execute(CANCEL_IN_WITH_WORKFLOWS, (wf["id"],)).fetchall()
    return TerminateRequest(True, tuple(r["effect_id"] for r in landing), children)


def _terminate_locked(cur, wf: dict, reason: str, by: str, children: dict[str, str]) -> bool:
    """Terminate the locked workflow row ``wf``; True when it ended it now."""
    if wf["status"] in TERMINAL or wf["status"] == "continued":
        return False
    error = {"type": "Terminated", "message": f"terminated by {by}: {reason}", "reason": reason, "by": by}
    ended = cur.execute(TERMINATE_UPDATE_WORKFLOWS, (codec.dumps(error, "error"), wf["id"])).fetchone()
    cur.execute(WITHDRAW_PENDING_OF_WORKFLOW, (by, f"the workflow was terminated: {reason}", wf["id"]))
    if ended["parent_id"]:
        cur.execute(WAKE_PARENT_UPDATE_WORKFLOWS, (ended["parent_id"], wf["id"]))
    close_children(cur, wf["id"], by, children)
    return True


def close_children(cur, parent_id: str, by: str, out: dict[str, str] | None = None) -> dict[str, str]:
    """Apply each running child's parent close policy, its parent ``parent_id`` having ended
    (its row locked by the caller). Returns {child id: what was done}."""
    out = {} if out is None else out
    for child in cur.execute(ACTIVE_CHILDREN, (parent_id,)).fetchall():
        policy = child["parent_close_policy"] or "request_cancel"
        if policy == "abandon":
            out[child["id"]] = "abandoned"
            continue
        lock_keys_of(cur, child["id"])
        locked = _lock_current_run(cur, child["id"])
        if policy == "terminate":
            if _terminate_locked(cur, locked, f"its parent {parent_id} ended", by, out):
                out[child["id"]] = "terminated"
        elif _cancel_tree(cur, locked, by):
            out[child["id"]] = "cancel requested"
    return out
