"""Concurrency keys on the client side: the key a start takes, the conflict policies, a queued
workflow's cancel, and the reads of keys (docs/protocol.md §5.4).

Acquire, release, admission and carry happen in the database (the triggers of migration 0016),
in the transaction of the write that starts or ends a workflow, and a start put off by its key's
rate is admitted at its turn by the workers' sweep (migration 0018, ``ilr.slot_wake``); this
module runs only what a start or a cancel adds around them.

Lock order: workflow rows, then the keys' locks (``ilr.slot_lock``: a concurrency key, then a
queue's key, then ctx.lock keys by name), then the rows of queued workflows. A transaction that
ends or cancels a workflow which may be queued takes its keys' locks before its row
(``lock_keys_of``), so every path follows the order and none waits crosswise.
"""

from __future__ import annotations

from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr import _registry as registry
from ilr._concurrency import check_key, check_limit, check_on_conflict
from ilr._conf import settings
from ilr._errors import InvalidInput, UnknownWorkflow, WorkflowNotFound
from ilr._queries.slots import (
    DISPATCHED_OF_WORKFLOW,
    END_QUEUED,
    KEYS_OF_WORKFLOW,
    LIVE_SLOTS_OF_KEY,
    LIVE_SLOTS_OF_WORKFLOW,
    LOCK_KEY,
    LOCK_RELEASE,
    QUEUE_LIVE_COUNTS,
    QUEUE_RECENT_STARTS,
)
from ilr._queries.workflows import LOCK_WORKFLOW_LOCK_WORKFLOWS_KEY, WAKE_PARENT_UPDATE_WORKFLOWS
from ilr._queues import rule_for, rules


def declaration(name: str, version: str):
    """The registered definition whose ``concurrency`` and ``queue`` a start of ``name@version``
    takes: ``name@version`` when this process registers it, else the newest version of ``name``
    it registers (a rolling deploy: the starting process runs the new code while the workers'
    version is the newest deployed, so the rule of the workflow still holds), else None (a
    workflow of another codebase: only a start's explicit arguments apply)."""
    try:
        return registry.get(name, version)
    except UnknownWorkflow:
        local = registry.versions(name)
        return local[-1] if local else None


def concurrency_for(
    name: str,
    version: str,
    input: Any,
    key: str | None = None,
    limit: int | None = None,
    on_conflict: str | None = None,
) -> tuple[str | None, int | None, str]:
    """The (key, limit, on_conflict) of a start: the arguments given, else the workflow's
    registered ``Concurrency`` rule (``declaration``: another registered version's when this
    process does not register ``version``), else no key.

    Raises:
        InvalidInput: a bad key, limit or on_conflict (fields "concurrency_key",
            "concurrency_limit", "on_conflict"), or a limit or policy without a key.
    """
    declared = declaration(name, version)
    rule = declared.concurrency if declared is not None else None
    if key is None and rule is not None:
        key = rule.key_for(input)
    elif key is not None:
        check_key(key)
    if limit is not None:
        check_limit(limit, "concurrency_limit")
    if on_conflict is not None:
        check_on_conflict(on_conflict)
    if key is None:
        if limit is not None or on_conflict is not None:
            field = "concurrency_limit" if limit is not None else "on_conflict"
            raise InvalidInput(field, "applies to a start with a concurrency key, and this one has none")
        return None, None, "queue"
    if limit is None:
        limit = rule.limit if rule is not None else 1
    if on_conflict is None:
        on_conflict = rule.on_conflict if rule is not None else "queue"
    return key, limit, on_conflict


def end_queued(cur, wf_id: str, *, by: str | None, why: str) -> bool:
    """End workflow ``wf_id``, queued for a key or delayed by a rate, cancelled, on a cursor of
    the caller's transaction, which holds its row lock (and its parent's first, when it has
    one). It never ran, so there is nothing to compensate; its status trigger releases its
    slots and its place in a queue, and a parent waiting on it wakes.

    Returns:
        True when it was queued and is now cancelled.
    """
    error = {"type": "Cancelled", "message": f"cancelled while queued for its concurrency key: {why}"}
    row = cur.execute(END_QUEUED, (codec.dumps(error, "error"), by, wf_id)).fetchone()
    if row is None:
        return False
    if row["parent_id"]:
        cur.execute(WAKE_PARENT_UPDATE_WORKFLOWS, (row["parent_id"], wf_id))
    return True


def lock_keys_of(cur, wf_id: str) -> None:
    """Take the locks of ``wf_id``'s live keys, in lock order, before locking its row: a
    transaction that may end a queued workflow must not hold its row while it waits for a key
    (an admission holds the key and waits for the row)."""
    for row in cur.execute(KEYS_OF_WORKFLOW, (wf_id,)).fetchall():
        cur.execute(LOCK_KEY, (row["key"],))


def is_queued(wf: dict) -> bool:
    """Whether a workflow row has not started: pending, waiting for a slot of a key or for the
    time a rate gives it (``waiting.kind`` "slot" or "rate")."""
    return wf.get("status") == "pending" and (wf.get("waiting") or {}).get("kind") in ("slot", "rate")


def workflow_rows(conn, wf_id: str) -> list[dict]:
    """The live rows of ``wf_id`` in ilr.slots: {key, workflow_id, slot_limit, slot_no (None
    while queued), priority, queued_at, acquired_at}."""
    return conn.cursor(row_factory=dict_row).execute(LIVE_SLOTS_OF_WORKFLOW, (wf_id,)).fetchall()


def key_rows(conn, key: str) -> list[dict]:
    """The live rows of ``key``: holders by slot number, then waiters in admission order."""
    return conn.cursor(row_factory=dict_row).execute(LIVE_SLOTS_OF_KEY, (key,)).fetchall()


def describe_key(conn, key: str) -> dict:
    """A key's holders and queue, as ``Runtime.concurrency`` returns it; a queue's key
    ("queue:<name>") too.

    Returns:
        {"key", "holders": [{workflow_id, slot_no, acquired_at}], "waiting": [{workflow_id,
        position (1 = next), priority, queued_at, put_off_until}]}. ``put_off_until`` is set for
        a start its key's rate put off (it holds no slot and joins the queue then: its
        ``queued_at``), else None; ``Runtime.queues`` counts those apart, as ``put_off``.

    Raises:
        InvalidInput: a bad key (field "concurrency_key").
    """
    check_key(key, queue_keys=True)
    rows = key_rows(conn, key)
    holders = [
        {"workflow_id": r["workflow_id"], "slot_no": r["slot_no"], "acquired_at": r["acquired_at"]}
        for r in rows
        if r["slot_no"] is not None
    ]
    waiting = [
        {
            "workflow_id": r["workflow_id"],
            "position": i,
            "priority": r["priority"],
            "queued_at": r["queued_at"],
            "put_off_until": r["deferred_until"],
        }
        for i, r in enumerate((r for r in rows if r["slot_no"] is None), 1)
    ]
    return {"key": key, "holders": holders, "waiting": waiting}


def describe_workflow(conn, wf_id: str) -> list[dict]:
    """What ``describe`` shows of a workflow's keys: per live row {"key", "limit", "state"
    ("holding" or "queued"), "slot_no", "position" (1 = next, while queued), "holders"}."""
    out = []
    for row in workflow_rows(conn, wf_id):
        key = describe_key(conn, row["key"])
        position = next((w["position"] for w in key["waiting"] if w["workflow_id"] == wf_id), None)
        out.append(
            {
                "key": row["key"],
                "limit": row["slot_limit"],
                "state": "holding" if row["slot_no"] is not None else "queued",
                "slot_no": row["slot_no"],
                "position": position,
                "holders": [h["workflow_id"] for h in key["holders"]],
            }
        )
    return out


def queues_on(conn) -> list[dict]:
    """Every queue of ILR_QUEUES with its rule and its state now, on ``conn`` (a psycopg
    connection; the admin passes Django's).

    Returns:
        per queue, by name: {"queue", "concurrency", "rate", "per_key_rate" (as configured),
        "holding" (workflows holding a slot of its key: running, sleeping, or delayed by the
        queue's rate), "waiting" (queued for one), "put_off" (starts their concurrency key's
        per_key_rate put off: they hold no slot until their turn), "oldest_waiting_since",
        "started_last_period"
        (starts the rate let run in the last rate period, or None without a rate),
        "limit_in_force" (the slot limit the queue's live workflows hold and wait under, 1000 for
        a rated queue without a concurrency, or None when none is live), "limit_changed" (True
        when that differs from the setting's: after ``concurrency`` changed, the old limit holds
        until the queue's live workflows drain)}.
    """
    queues = rules(settings.QUEUES)
    cur = conn.cursor(row_factory=dict_row)
    live = {r["key"]: r for r in cur.execute(QUEUE_LIVE_COUNTS, ([q.key for q in queues.values()],)).fetchall()}
    out = []
    for name in sorted(queues):
        rule = queues[name]
        row = live.get(rule.key, {})
        recent = None
        if rule.rate:
            recent = cur.execute(QUEUE_RECENT_STARTS, (rule.key, rule.rate[1])).fetchone()["n"]
        configured = (settings.QUEUES or {}).get(name, {})
        out.append(
            {
                "queue": name,
                "concurrency": rule.concurrency,
                "rate": configured.get("rate"),
                "per_key_rate": configured.get("per_key_rate"),
                "holding": row.get("holding", 0),
                "waiting": row.get("waiting", 0),
                "put_off": row.get("put_off", 0),
                "oldest_waiting_since": row.get("oldest_waiting_since"),
                "started_last_period": recent,
                "limit_in_force": row.get("limit_in_force"),
                "limit_changed": row.get("limit_in_force") not in (None, rule.slot_limit),
            }
        )
    return out


def revoke_lock_in(conn, wf_id: str, key: str, by: str) -> dict:
    """Take a ``ctx.lock`` slot away from workflow ``wf_id`` inside the caller's transaction: the
    slot goes to the next waiter now, and a gated effect the workflow sends inside that block
    from the commit on is refused (REFUSED:stale_premise). The workflow's own concurrency key is
    not revocable (cancel the workflow instead).

    Returns:
        {"released": whether it held a slot of the key (a workflow waiting for one keeps its
        place: False), "may_still_land": ids of the effects whose sends
        the workflow's dispatch authorized before this commit and that have not resolved}.

    Raises:
        InvalidInput: a bad key or ``by`` (fields "concurrency_key", "by"), or the workflow's
            own concurrency key (field "key").
        WorkflowNotFound: no workflow has this id.
    """
    codec.check_workflow_id(wf_id)
    check_key(key, "key")
    codec.check_who(by)
    cur = conn.cursor(row_factory=dict_row)
    wf = cur.execute(LOCK_WORKFLOW_LOCK_WORKFLOWS_KEY, (wf_id,)).fetchone()
    if wf is None:
        raise WorkflowNotFound(wf_id)
    if wf["concurrency_key"] == key:
        raise InvalidInput("key", f"{key!r} is the workflow's own concurrency key: cancel the workflow to free it")
    mine = [r for r in workflow_rows(conn, wf_id) if r["key"] == key]
    released = False
    # Only a holder's slot is taken away: a waiter keeps its place (its wait is not a grant).
    if mine and mine[0]["slot_no"] is not None:
        released = cur.execute(LOCK_RELEASE, (wf_id, key, f"revoked by {by}")).fetchone()["released"]
    # Read after the release, which waited for any T_dispatch holding the slot row FOR SHARE: a
    # dispatch that committed first is listed; one that comes after sees the slot gone.
    landing = [r["effect_id"] for r in cur.execute(DISPATCHED_OF_WORKFLOW, (wf_id,)).fetchall()]
    return {"released": released, "may_still_land": landing}


def queue_for(name: str, version: str, queue: str | None = None) -> tuple[str | None, int | None, str | None]:
    """The (queue, queue_limit, queue_rates JSON) of a start: ``queue`` when given, else the
    workflow's registered queue (``declaration``), else none.

    Raises:
        InvalidInput: a queue not in ILR_QUEUES (field "queue").
    """
    if queue is None:
        declared = declaration(name, version)
        queue = declared.queue if declared is not None else None
    if queue is None:
        return None, None, None
    rule = rule_for(queue, settings.QUEUES)
    rates = rule.rates
    return rule.name, rule.slot_limit, codec.dumps(rates, "queue_rates") if rates else None
