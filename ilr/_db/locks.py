"""The writes of ``ctx.lock`` (docs/protocol.md §5.4): take a key's slot or wait for it, and give
it back, each in one fenced transaction with its step row.

Lock order: the fence locks the workflow row, then the slot functions take the key's lock.
"""

from __future__ import annotations

import json

from ilr import _db as db
from ilr._db.store import insert_step
from ilr._errors import InvalidInput, Suspend
from ilr._queries.slots import LOCK_MARK_HOLDER, LOCK_RELEASE, LOCK_TAKE
from ilr._queries.workflows import SUSPEND_UPDATE_WORKFLOWS


def take(conn: db.Connection, run, *, seq: int, name: str, key: str, limit: int) -> int:
    """Take a slot of ``key`` (``limit`` slots) for the run's workflow and record the ``lock``
    step at ``seq``; or queue for one and suspend until a release admits the workflow.

    Returns:
        the slot number.

    Raises:
        InvalidInput: ``key`` is the workflow's own concurrency key (field "key"); the
            transaction rolls back, nothing is written.
        Suspend: queued; the workflow sleeps (``waiting`` {seq, kind "lock", name, key}) until
            admitted, and then replays to this call, which finds its slot.
        Fenced: the claim is no longer current; nothing was written.
    """
    t0 = run.clock()
    with conn.transaction():
        cur = conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        own = _one(cur.execute(LOCK_MARK_HOLDER, (run.workflow_id,)))["concurrency_key"]
        if own == key:
            raise InvalidInput("key", f"{key!r} is this workflow's own concurrency key, which it holds already")
        slot_no = _one(cur.execute(LOCK_TAKE, {"wf": run.workflow_id, "key": key, "limit": limit}))["slot_no"]
        if slot_no is not None:
            insert_step(cur, run, seq, "lock", name, json.dumps({"key": key, "slot_no": slot_no}))
            run.renewed(t0, fence["cancel_requested_at"])
            return slot_no
        # Queued, in this transaction, under the key's lock: a release that commits after it
        # admits this workflow (and wakes it); one that committed before left the slot free.
        waiting = {"seq": seq, "kind": "lock", "name": name, "key": key}
        unseen_cancel = fence["cancel_requested_at"] is not None and not run.cancel_requested  # as store.suspend
        cur.execute(SUSPEND_UPDATE_WORKFLOWS, (json.dumps(waiting), unseen_cancel, json.dumps(None), run.workflow_id))
    run.released = True
    raise Suspend()


def give_back(conn: db.Connection, run, *, seq: int, name: str, key: str) -> bool:
    """Release the run's slot of ``key`` (admitting the next waiter) and record the ``lock``
    step at ``seq``, in one fenced transaction.

    Returns:
        whether the slot was still held (False after a revoke).

    Raises:
        Fenced: the claim is no longer current; nothing was written.
    """
    t0 = run.clock()
    with conn.transaction():
        cur = conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        released = _one(cur.execute(LOCK_RELEASE, (run.workflow_id, key, "unlocked")))["released"]
        insert_step(cur, run, seq, "lock", name, json.dumps({"key": key, "released": released}))
        run.renewed(t0, fence["cancel_requested_at"])
    return released


def _one(result) -> dict:
    # The statements above return one row each: the fence matched the workflow's row.
    row = result.fetchone()
    assert row is not None
    return row
