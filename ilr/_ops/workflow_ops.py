"""Operator writes on one workflow: signal, cancel, resume and fork (docs/protocol.md §4, §5).

Each ``*_in`` function is a transaction body: it runs inside the caller's transaction on any
psycopg 3 connection (Django's included: ``connection.connection`` inside
``transaction.atomic()``), so ``Runtime``, admin actions and race tests share the exact SQL.
Lock order everywhere: workflow row, then effect row, then grant row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr._codec import check_workflow_id
from ilr._db.store import successor_id
from ilr._errors import InvalidInput, WorkflowNotFound
from ilr._ops.slots import end_queued, is_queued, lock_keys_of
from ilr._queries.claims import FORK_IN_INSERT_CLAIMS
from ilr._queries.signals import SIGNAL_IN_INSERT_SIGNALS
from ilr._queries.steps import FORK_IN_INSERT_STEPS, FORK_IN_SELECT_STEPS
from ilr._queries.workflows import (
    APPROVE_IN_UPDATE_WORKFLOWS,
    CANCEL_IN_WITH_WORKFLOWS,
    CANCEL_TREE_SELECT_WORKFLOWS,
    CANCEL_TREE_UPDATE_WORKFLOWS,
    FORK_IN_INSERT_WORKFLOWS,
    FORK_IN_SELECT_WORKFLOWS,
    LOCK_CURRENT_RUN_SELECT_WORKFLOWS,
    LOCK_WORKFLOW_LOCK_WORKFLOWS,
    PARENT_OF_SELECT_WORKFLOWS,
    RESUME_IN_LOCK_WORKFLOWS,
    RESUME_IN_UPDATE_WORKFLOWS,
)
from ilr._statuses import TERMINAL
from ilr._telemetry import hooks, tracing

FORK_OWNER = "$fork"


def _lock_workflow(cur, wf_id: str) -> dict:
    row = cur.execute(
        LOCK_WORKFLOW_LOCK_WORKFLOWS,
        (wf_id,),
    ).fetchone()
    if row is None:
        raise WorkflowNotFound(wf_id)
    return row


def _lock_current_run(cur, wf_id: str) -> dict:
    """Lock ``wf_id``'s row; when it continued-as-new, follow the chain to the current run and
    lock that (messages to a workflow id reach its latest run, as in Temporal)."""
    wf = _lock_workflow(cur, wf_id)
    while wf["status"] == "continued":
        nxt = cur.execute(LOCK_CURRENT_RUN_SELECT_WORKFLOWS, (successor_id(wf["id"], wf["continued_from"]),)).fetchone()
        if nxt is None:
            break
        wf = _lock_workflow(cur, nxt["id"])
    return wf


def signal_in(conn: psycopg.Connection[Any], wf_id: str, name: str, payload: Any, sender: str | None = None) -> int:
    """Insert signal ``name`` for ``wf_id`` and wake it if it waits on that signal.

    Runs inside the caller's transaction. It locks the workflow row first, so against the
    suspend transaction (which fences, i.e. locks, the same row first) either this commits
    before the mailbox read, or it waits and then sees the row sleeping and wakes it
    (NoLostWakeup, docs/protocol.md §5.1). A workflow that continued-as-new passes the signal to
    its current run (§5.3).

    Args:
        conn: a psycopg 3 connection inside a transaction.
        payload: plain JSON, None included (stored as JSON null; the wait returns it as sent).

    Returns:
        the signal id.

    Raises:
        WorkflowNotFound: no workflow has this id.
        InvalidInput: empty name, payload not plain JSON, a ``sender`` that is neither None nor
            a name (codec.check_text), or the workflow already ended.
    """
    check_workflow_id(wf_id)
    if not isinstance(name, str) or not name:
        raise InvalidInput("name", "a signal needs a non-empty name")
    codec.check_text(name, "name", "a signal needs a non-empty name")
    if sender is not None:
        codec.check_text(sender, "sender", "must name who sent the signal (a non-empty string), or be None")
    payload_json = codec.dumps(payload, "payload")
    cur = conn.cursor(row_factory=dict_row)
    wf = _lock_current_run(cur, wf_id)
    if wf["status"] in TERMINAL or wf["status"] == "continued":
        raise InvalidInput("workflow_id", f"workflow {wf['id']} is {wf['status']}; it takes no more signals")
    sig = cur.execute(
        SIGNAL_IN_INSERT_SIGNALS,
        (wf["id"], name, payload_json, sender),
    ).fetchone()
    assert sig is not None  # an INSERT ... RETURNING without ON CONFLICT returns its row or raises
    if hooks.on:  # rt.signal's span links to the workflow span of the run it reached
        tracing.link_to_workflow(wf["id"], wf["trace_context"])
    waiting = codec.loads_jsonb(wf["waiting"]) or {}
    if wf["status"] == "sleeping" and waiting.get("kind") == "signal" and waiting.get("signal") == name:
        cur.execute(APPROVE_IN_UPDATE_WORKFLOWS, (wf["id"],))
    return sig["id"]


CANCEL_CHILDREN = ("tree", "policy")
"""What ``cancel_in`` does to running children: "tree" requests the cancel of those whose parent
close policy is "request_cancel" now (recursively) and leaves the others to their policies;
"policy" leaves every child to its parent close policy, applied when the parent ends."""


@dataclass(frozen=True)
class CancelRequest:
    """What a cancel did: whether it requested the cancel, which sends may still land, and what
    it did to the workflow's descendants.

    A cancel stops every send not yet authorized; it cannot recall one already authorized. A
    send whose T_dispatch (or recovery resend) committed before the cancel goes out, or was
    already out, when the cancel commits; its effect is listed until it resolves, as
    ``rt.revoke`` lists the effects a revoke cannot stop.

    Attributes:
        requested: True when this call requested the cancel; False when the workflow had
            already ended or a cancel was already requested. The object's truth value.
        may_still_land: ids of the effects in state dispatched under the workflow or its
            children (sorted): their sends were authorized before the cancel and may land.
        children: {descendant id: "cancel requested" | "abandoned" | "at the parent's end:
            <policy>"} for each running descendant the cancel reached.
    """

    requested: bool
    may_still_land: tuple[str, ...] = ()
    children: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.requested


def cancel_in(
    conn: psycopg.Connection[Any], wf_id: str, by: str | None = None, children: str = "tree"
) -> CancelRequest:
    """Request cancellation of ``wf_id`` inside the caller's transaction.

    Sets cancel_requested_at and cancel_requested_by (``by``: who asks) once (the first cancel
    wins) and wakes a sleeping or pending workflow, so the Cancelled exception is delivered at
    its next durable call. ``children`` (CANCEL_CHILDREN): "tree" (the default) also requests the
    cancel of its running children whose parent close policy is "request_cancel" now (lock order
    parent, then children); "policy" leaves every child to its policy, applied when the workflow
    ends (a "terminate" child is always left to its parent's end). A workflow that
    continued-as-new is cancelled in its current run. From the commit on, T_dispatch refuses
    every non-compensation send (NoSendAfterCancel).

    Returns:
        a CancelRequest: truthy when this call requested the cancel, the effects whose
        authorized sends may still land, and what it did to each running descendant.

    Raises:
        WorkflowNotFound: no workflow has this id.
        InvalidInput: a bad workflow id, a ``by`` that does not name who cancels, or a
            ``children`` not in CANCEL_CHILDREN (each naming its field).
    """
    check_workflow_id(wf_id)
    if by is not None:
        codec.check_who(by)
    if children not in CANCEL_CHILDREN:
        raise InvalidInput("children", f"must be one of {', '.join(CANCEL_CHILDREN)}, got {children!r}")
    cur = conn.cursor(row_factory=dict_row)
    _lock_parent_of_queued(cur, wf_id)
    wf = _lock_current_run(cur, wf_id)
    reached: dict[str, str] = {}
    requested = _cancel_tree(cur, wf, by, reached, tree=children == "tree")
    # Read after the workflow rows are locked. T_dispatch's fence updates the same row first, so
    # a T_dispatch either committed before the lock was granted (its dispatched state is visible
    # to this later statement: READ COMMITTED) or waits for this commit and then refuses on
    # cancel_requested_at. What this lists is exactly what the cancel could not stop.
    landing = cur.execute(
        CANCEL_IN_WITH_WORKFLOWS,
        (wf["id"],),
    ).fetchall()
    return CancelRequest(requested, tuple(r["effect_id"] for r in landing), reached if requested else {})


def _lock_parent_of_queued(cur, wf_id: str) -> None:
    """When ``wf_id`` is queued for a concurrency key (or delayed by a rate), lock what its cancel
    will need before its row: its parent's row (the cancel ends it at once and wakes the parent;
    parent, then child) and its keys (``lock_keys_of``)."""
    row = cur.execute(PARENT_OF_SELECT_WORKFLOWS, (wf_id,)).fetchone()
    if row is not None and is_queued(row):
        if row["parent_id"]:
            _lock_workflow(cur, row["parent_id"])
        lock_keys_of(cur, wf_id)


def _cancel_tree(cur, wf: dict, by: str | None, reached: dict[str, str] | None = None, tree: bool = True) -> bool:
    """Cancel the locked workflow row ``wf``; with ``tree``, request the cancel of its running
    children whose parent close policy is "request_cancel" too. True when it requested.
    What was done to each running descendant goes into ``reached``.

    A workflow queued for a concurrency key never ran: it ends cancelled now (``end_queued``),
    so it never runs, not even its compensation (docs/protocol.md §5.4)."""
    if wf["status"] in TERMINAL or wf["status"] == "continued" or wf["cancel_requested_at"] is not None:
        return False
    if is_queued(wf):
        return end_queued(cur, wf["id"], by=by, why="its cancel was requested")
    cur.execute(
        CANCEL_TREE_UPDATE_WORKFLOWS,
        (by, wf["id"]),
    )
    reached = {} if reached is None else reached
    for child in cur.execute(CANCEL_TREE_SELECT_WORKFLOWS, (wf["id"],)).fetchall():
        if tree and child["policy"] == "request_cancel":
            lock_keys_of(cur, child["id"])  # a queued child ends at once: its keys before its row
            if _cancel_tree(cur, _lock_current_run(cur, child["id"]), by, reached):
                reached[child["id"]] = "cancel requested"
        elif child["policy"] == "abandon":
            reached[child["id"]] = "abandoned"
        else:  # "terminate", or "policy" chosen: the parent's end applies the policy (close_children)
            reached[child["id"]] = f"at the parent's end: {child['policy']}"
    return True


def resume_in(conn: psycopg.Connection[Any], wf_id: str, by: str) -> dict:
    """Resume a stuck workflow inside the caller's transaction: an operator's way back from a
    crash loop, a NonDeterminism after the code was fixed, or a swallowed Suspend.

    Rule: only a stuck workflow resumes. It becomes pending and due now, with takeovers reset to
    0 (the crash-loop guard starts over), the error cleared, and resumed_by / resumed_at set;
    nothing else changes. Kept: every recorded step row (its outputs and errors), signals
    consumed or not, effects and their journal, the epoch, the waiting state (a recorded timer
    keeps its deadline), a requested cancel, the version (``Runtime.migrate`` changes that).
    Re-run: the next claim replays the workflow code over the recorded steps; the first step
    without a row runs its body again (at least once, as after any crash), and an effect left
    dispatched goes through recovery, never a blind resend.

    No run of the workflow is in flight: its stuck write (CrashLoop, NonDeterminism, Suspend
    swallowed) is the last write of the claim that made it, no worker claims a stuck row, and
    the row lock taken here orders this against any other resume, migrate or cancel. The next
    claim bumps the epoch as every claim does.

    Args:
        by: who resumes (a person or service; recorded as resumed_by).

    Returns:
        {"workflow_id", "status": "pending", "error": the error it was stuck with (now cleared),
        "steps": how many step rows it keeps, "resumed_by", "resumed_at"}.

    Raises:
        InvalidInput: a bad workflow id (field "workflow_id"), a ``by`` that names no one (field
            "by"), or a workflow that is not stuck (field "workflow_id"); nothing is written.
        WorkflowNotFound: no workflow has this id.
    """
    check_workflow_id(wf_id)
    codec.check_who(by)
    cur = conn.cursor(row_factory=dict_row)
    wf = cur.execute(RESUME_IN_LOCK_WORKFLOWS, (wf_id,)).fetchone()
    if wf is None:
        raise WorkflowNotFound(wf_id)
    if wf["status"] != "stuck":
        raise InvalidInput("workflow_id", f"workflow {wf_id} is {wf['status']}: only a stuck workflow resumes")
    row = cur.execute(
        RESUME_IN_UPDATE_WORKFLOWS,
        (by, wf_id, wf_id),
    ).fetchone()
    assert row is not None  # the row was locked FOR UPDATE above, so the update matched it
    return {
        "workflow_id": wf_id,
        "status": "pending",
        "error": wf["error"],
        "steps": row["steps"],
        "resumed_by": by,
        "resumed_at": row["resumed_at"],
    }


def fork_in(conn: psycopg.Connection[Any], wf_id: str, at_seq: int, new_id: str) -> str:
    """The transaction body of ``Runtime.fork`` (see there): a new pending workflow ``new_id``
    with ``wf_id``'s name, version and input, a synthetic ``$fork`` claim (epoch 1) and copies
    of its step rows below ``at_seq``.

    Returns:
        new_id.

    Raises:
        InvalidInput: a bad id; ``at_seq`` not an integer >= 1 or beyond the history (field
            "at_seq"); ``new_id`` already exists (field "new_id").
        WorkflowNotFound: no workflow ``wf_id``.
    """
    check_workflow_id(wf_id)
    check_workflow_id(new_id, "new_id")
    if not isinstance(at_seq, int) or isinstance(at_seq, bool) or at_seq < 1:
        raise InvalidInput("at_seq", f"a fork point is a seq, an integer >= 1, got {at_seq!r}")
    cur = conn.cursor(row_factory=dict_row)
    src = cur.execute(FORK_IN_SELECT_WORKFLOWS, (wf_id,)).fetchone()
    if src is None:
        raise WorkflowNotFound(wf_id)
    history = cur.execute(FORK_IN_SELECT_STEPS, (wf_id,)).fetchone()
    assert history is not None  # an aggregate without GROUP BY returns one row
    top = history["top"]
    if at_seq > top + 1:
        raise InvalidInput(
            "at_seq",
            f"seq {at_seq} is beyond the history of {wf_id} (steps 1 to {top}); "
            f"fork at 1 to {top + 1} ({top + 1} copies every step)",
        )
    inserted = cur.execute(
        FORK_IN_INSERT_WORKFLOWS,
        (new_id, wf_id),
    ).fetchone()
    if inserted is None:
        raise InvalidInput("new_id", f"a workflow {new_id!r} already exists; a fork needs a new id")
    # The copies are written under a synthetic claim (epoch 1, owner $fork), so every step
    # row belongs to a claimed epoch (FencedWrites); the first worker claim is epoch 2.
    cur.execute(
        FORK_IN_INSERT_CLAIMS,
        (new_id, FORK_OWNER, src["version"]),
    )
    cur.execute(
        FORK_IN_INSERT_STEPS,
        (new_id, wf_id, at_seq),
    )
    return new_id
