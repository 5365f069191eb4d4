"""``ctx.continue_as_new``'s write (docs/protocol.md §5.3): the run ends ``continued`` and its
successor ``<id>#<n>`` starts, in one fenced transaction."""

from __future__ import annotations

import json

from ilr import _db as db
from ilr._db.store import MAX_ID_LENGTH, lock_parent, successor_id, wake_parent
from ilr._errors import InvalidInput
from ilr._queries.signals import MOVE_TO_SUCCESSOR
from ilr._queries.workflows import (
    CONTINUE_AS_NEW_INSERT_WORKFLOWS,
    CONTINUE_AS_NEW_SELECT_WORKFLOWS,
    CONTINUE_AS_NEW_UPDATE_WORKFLOWS,
)


def continue_as_new(conn: db.Connection, run, input_json: str, after=None) -> str:
    """``ctx.continue_as_new``'s write (docs/protocol.md §5.3): in one fenced transaction, mark this
    run ``continued`` (result {"continued_as": successor}), hand its unconsumed signals to the
    successor, and insert the successor ``<id>#<n>``
    (same name and version, ``continued_from`` this id, the same parent, a requested cancel carried
    over, the same priority and concurrency key, whose slot the insert trigger carries over);
    wake a parent waiting on this run; then ``after(cur)`` when given (the parent close policies of
    this run's children: a run that continues as new closes, as in Temporal).

    Returns:
        the successor's id.

    Raises:
        InvalidInput: the successor id exists or would exceed 200 characters (field
            "continue_as_new"); nothing is written.
        Fenced: the claim is no longer current; nothing was written.
    """
    with conn.transaction():
        cur = conn.cursor()
        lock_parent(cur, run)
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        wf = cur.execute(CONTINUE_AS_NEW_SELECT_WORKFLOWS, (run.workflow_id,)).fetchone()
        assert wf is not None  # the fence above matched this row and holds its lock
        succ = successor_id(wf["id"], wf["continued_from"])
        if len(succ) > MAX_ID_LENGTH:
            raise InvalidInput("continue_as_new", f"the successor id {succ!r} would exceed {MAX_ID_LENGTH} characters")
        inserted = cur.execute(
            CONTINUE_AS_NEW_INSERT_WORKFLOWS,
            (
                succ,
                wf["name"],
                wf["version"],
                input_json,
                wf["parent_id"],
                wf["id"],
                fence["cancel_requested_at"],
                wf["priority"],
                wf["concurrency_key"],
                wf["concurrency_limit"],
                wf["queue"],
                wf["queue_limit"],
                json.dumps(wf["queue_rates"]) if wf["queue_rates"] is not None else None,
                wf["parent_close_policy"],
                wf["trace_context"],  # the successor's spans stay where its predecessor's were
            ),
        ).fetchone()
        if inserted is None:
            raise InvalidInput("continue_as_new", f"the successor id {succ!r} already exists")
        cur.execute(
            CONTINUE_AS_NEW_UPDATE_WORKFLOWS,
            (json.dumps({"continued_as": succ}), run.workflow_id),
        )
        # Signals this run had not consumed are the successor's now, in order, once each: the
        # fence holds this run's row, so signal_in (which locks the row first) either inserted
        # them before (moved here) or waits and follows the chain to the successor.
        cur.execute(MOVE_TO_SUCCESSOR, (succ, run.workflow_id))
        if wf["parent_id"]:
            wake_parent(cur, wf["parent_id"], run.workflow_id)
        if after is not None:
            after(cur)  # this run's row is locked (the fence): parent before children
    run.released = True
    return succ
