"""Starting a workflow: the row, its priority and concurrency key, and the key's conflict policy,
in one transaction (``Runtime.start``; docs/protocol.md §5.4)."""

from __future__ import annotations

from psycopg.rows import dict_row

from ilr._errors import ConcurrencyLimitReached, InvalidInput, WorkflowConflict
from ilr._ops.slots import end_queued, key_rows, workflow_rows
from ilr._ops.workflow_ops import cancel_in
from ilr._queries.slots import LOCK_KEY, LOCK_QUEUED_TOP_LEVEL
from ilr._queries.workflows import APPROVE_REQUEST_IN_SELECT_WORKFLOWS, START_INSERT_WORKFLOWS

CONCURRENCY_ACTOR = "$concurrency"
"""The ``cancel_requested_by`` prefix of a cancel that a start's conflict policy requested."""


def check_priority(priority) -> int:
    """``priority`` when it is an int from -100 to 100; else InvalidInput naming "priority"."""
    if isinstance(priority, bool) or not isinstance(priority, int) or not -100 <= priority <= 100:
        raise InvalidInput("priority", f"must be an int from -100 to 100 (higher runs first), got {priority!r}")
    return priority


def start_in(
    conn,
    wf_id: str,
    name: str,
    version: str,
    input_json: str,
    *,
    priority: int = 0,
    key: str | None = None,
    limit: int | None = None,
    on_conflict: str = "queue",
) -> bool:
    """Insert the workflow row inside the caller's transaction; idempotent on the id.

    With a key, the row's insert trigger takes a free slot or queues the workflow; first
    ``on_conflict`` acts: cancel_running requests cancellation of the holders when they fill the
    limit (by ``$concurrency:<wf_id>``), replace_queued ends the key's queued top-level starts
    (cancelled, never run); after the insert, reject raises when the workflow queued.

    Returns:
        True when this call inserted the row; False when the id existed (for this name; the
        policy then does nothing).

    Raises:
        WorkflowConflict: the id belongs to another workflow name.
        ConcurrencyLimitReached: on_conflict "reject" and the key is full; the caller's
            transaction must roll back (``Runtime.start`` does), so nothing is written.
    """
    cur = conn.cursor(row_factory=dict_row)
    if key is not None:
        existing = cur.execute(APPROVE_REQUEST_IN_SELECT_WORKFLOWS, (wf_id,)).fetchone()
        if existing is not None:
            return _existing(existing, wf_id, name)
        _before_insert(conn, cur, wf_id, key, limit or 1, on_conflict)
    row = cur.execute(START_INSERT_WORKFLOWS, (wf_id, name, version, input_json, priority, key, limit)).fetchone()
    if row is None:
        existing = cur.execute(APPROVE_REQUEST_IN_SELECT_WORKFLOWS, (wf_id,)).fetchone()
        return _existing(existing, wf_id, name)
    if key is not None and on_conflict == "reject":
        mine = [r for r in workflow_rows(conn, wf_id) if r["key"] == key]
        if mine and mine[0]["slot_no"] is None:
            holders = [r["workflow_id"] for r in key_rows(conn, key) if r["slot_no"] is not None]
            raise ConcurrencyLimitReached(key, limit or 1, holders)
    return True


def _existing(existing, wf_id: str, name: str) -> bool:
    if existing and existing["name"] != name:
        raise WorkflowConflict(
            f"workflow_id: {wf_id!r} already belongs to the workflow {existing['name']!r}, not {name!r}"
        )
    return False


def _before_insert(conn, cur, wf_id: str, key: str, limit: int, on_conflict: str) -> None:
    # Lock order (ilr._ops.slots): cancel_in locks the holders' rows before the insert takes the
    # key's lock; replace_queued takes the key's lock and then the queued rows without waiting.
    by = f"{CONCURRENCY_ACTOR}:{wf_id}"
    if on_conflict == "cancel_running":
        holders = [r["workflow_id"] for r in key_rows(conn, key) if r["slot_no"] is not None]
        if len(holders) >= limit:
            for holder in holders:
                cancel_in(conn, holder, by=by)
    elif on_conflict == "replace_queued":
        cur.execute(LOCK_KEY, (key,))
        for row in cur.execute(LOCK_QUEUED_TOP_LEVEL, (key,)).fetchall():
            end_queued(cur, row["workflow_id"], by=by, why=f"replaced by {wf_id}")
