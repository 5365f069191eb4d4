"""Statements on ilr.slots: concurrency keys, their holders and waiters (docs/protocol.md §5.4).

Acquire, release, admission and carry are the SQL functions of migration 0016, run by the
triggers on ilr.workflows; these are the reads and the writes a start or a cancel adds.
"""

from __future__ import annotations

SLOT_COLUMNS = "key, workflow_id, slot_limit, slot_no, priority, queued_at, acquired_at, deferred_until"
"""The columns the reads below return."""

LIVE_SLOTS_OF_WORKFLOW = (
    f"select {SLOT_COLUMNS} from ilr.slots where workflow_id = %s and released_at is null order by key"
)
"""A workflow's live rows: the slots it holds and the keys it waits on (``_ops.slots``)."""

LIVE_SLOTS_OF_KEY = (
    f"select {SLOT_COLUMNS} from ilr.slots where key = %s and released_at is null "
    "order by slot_no nulls last, priority desc, queued_at, id"
)
"""A key's holders (by slot number), then its waiters in admission order (``_ops.slots``)."""

LOCK_KEY = "select ilr.slot_lock(%s)"
"""Take the key's transaction lock, the one every acquire and release of it takes (``_ops.slots``)."""

SHORT_LOCK_WAITS = "select current_setting('lock_timeout') as previous, set_config('lock_timeout', %s, true)"
"""Bound this transaction's lock waits (``_ops.starts``: cancels under a key's lock, where a wait
could close a cycle with a holder's end), returning the bound in force before."""

RESTORE_LOCK_WAITS = "select set_config('lock_timeout', %s, true)"
"""Put back the lock wait bound that ``SHORT_LOCK_WAITS`` returned."""

LOCK_QUEUED_TOP_LEVEL = (
    "select s.workflow_id from ilr.slots s join ilr.workflows w on w.id = s.workflow_id "
    "where s.key = %s and s.released_at is null and s.slot_no is null and w.parent_id is null "
    "order by s.queued_at, s.id for update of w"
)
"""Lock the queued top-level workflows of a key, under its key lock (``_ops.starts``, replace_queued
and cancel_running): keys before waiters' rows, the lock order."""

KEYS_OF_WORKFLOW = (
    "select s.key from ilr.slots s join ilr.workflows w on w.id = s.workflow_id "
    "where s.workflow_id = %s and s.released_at is null "
    "order by s.key is distinct from w.concurrency_key, s.key is distinct from 'queue:' || w.queue, s.key"
)
"""A workflow's live keys in lock order: its concurrency key, its queue's, the others by name
(``_ops.slots.lock_keys_of``)."""

END_QUEUED = (
    "update ilr.workflows set status = 'cancelled', error = %s::jsonb, "
    "cancel_requested_at = coalesce(cancel_requested_at, now()), "
    "cancel_requested_by = coalesce(cancel_requested_by, %s), waiting = null, updated_at = now() "
    "where id = %s and status = 'pending' and waiting->>'kind' in ('slot', 'rate') returning id, parent_id"
)
"""End a queued workflow cancelled: it never ran, so nothing is compensated; its status trigger
releases its place in the queue (``_ops.slots.end_queued``)."""

QUEUE_LIVE_COUNTS = """
select key, count(*) filter (where slot_no is not null) as holding,
       count(*) filter (where slot_no is null and deferred_until is null) as waiting,
       count(*) filter (where deferred_until is not null) as put_off,
       min(queued_at) filter (where slot_no is null and deferred_until is null) as oldest_waiting_since,
       max(slot_limit) as limit_in_force
  from ilr.slots where released_at is null and key = any(%s::text[])
 group by key
"""
"""Per queue key: its live holders (running, or admitted and waiting for the queue's rate to let
them run), its waiters and the oldest one's queue time, the starts their key's rate put off
(no slot held; migration 0018), and the limit its live rows carry, which holds until they drain
even when the setting changed (``_ops.slots.queues_on``)."""

QUEUE_RECENT_STARTS = (
    "select count(*) as n from ilr.slots where key = %s and not_before > now() - make_interval(secs => %s) "
    "and not_before <= now()"
)
"""How many starts of a key the rate let run in the last period, in seconds (``_ops.slots.queues_on``)."""

# -- ctx.lock (a durable lock inside a workflow) ------------------------------------------------

LOCK_MARK_HOLDER = "update ilr.workflows set holds_locks = true where id = %s returning concurrency_key"
"""Mark a workflow as one that takes ctx.lock slots, so its end releases them; returns its own
concurrency key, which a lock may not name (``_db.locks``)."""

LOCK_TAKE = (
    "select ilr.slot_take(%(wf)s, %(key)s, %(limit)s::smallint, "
    "(select priority from ilr.workflows where id = %(wf)s)) as slot_no"
)
"""Take a slot of the key for the workflow, or queue it; its slot when it has a live row (``_db.locks``)."""

LOCK_RELEASE = "select ilr.slot_unlock(%s, %s, %s) as released"
"""Release a workflow's live row of a key and admit the next waiter (``_db.locks``, ``_ops.slots``)."""

LOCKS_HELD_FOR_SHARE = (
    "select key from ilr.slots where workflow_id = %s and key = any(%s::text[]) and slot_no is not null "
    "and released_at is null for share"
)
"""The keys of a ctx.lock block a workflow still holds, read in T_dispatch under FOR SHARE: a revoke
of one waits for the dispatch to commit, and one that committed first is seen (``_context.locks``)."""

DISPATCHED_OF_WORKFLOW = (
    "select effect_id from ilr.effects where state = 'dispatched' and dispatch_workflow_id = %s order by effect_id"
)
"""The effects whose sends a workflow's dispatch authorized and that have not resolved
(``_ops.slots.revoke_lock_in``)."""

# -- rates before the queue's slot (migration 0018) -----------------------------------------------

SLOT_WAKE = "select ilr.slot_wake() as woken"
"""The sweep: admit the waiters of a queue's key that their key's per_key_rate put off and whose
turn has come, into the key's free slots (``_worker.worker``, at most every SLOT_WAKE_EVERY s)."""
