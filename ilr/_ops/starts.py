"""Starting a workflow: the row, its priority and concurrency key, the key's conflict policy and
deduplication, in one transaction (``Runtime.start``; docs/protocol.md §5.4, §5.5)."""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from ilr._errors import ConcurrencyLimitReached, InvalidInput, WorkflowConflict
from ilr._ops.slots import end_queued, key_rows, workflow_rows
from ilr._ops.workflow_ops import cancel_in
from ilr._queries.slots import LOCK_KEY, LOCK_QUEUED_TOP_LEVEL, RESTORE_LOCK_WAITS, SHORT_LOCK_WAITS
from ilr._queries.workflows import (
    APPROVE_REQUEST_IN_SELECT_WORKFLOWS,
    DEDUP_FIND,
    DEDUP_LOCK,
    START_INSERT_WORKFLOWS,
)
from ilr._telemetry import hooks, tracing

MAX_DEDUP_WINDOW = 30 * 86400.0
"""The longest deduplication window, in seconds (30 days)."""

CONCURRENCY_ACTOR = "$concurrency"
"""The ``cancel_requested_by`` prefix of a cancel that a start's conflict policy requested."""


class Started(str):
    """The id ``Runtime.start`` returns: a str, with ``deduplicated`` True when a start with the
    same ``dedup_key`` inside its window had started that workflow and this call started
    nothing, and ``existed`` True when a workflow with this id existed already (an idempotent
    start: this call started nothing)."""

    deduplicated: bool
    existed: bool

    def __new__(cls, wf_id: str, deduplicated: bool = False, existed: bool = False):
        obj = super().__new__(cls, wf_id)
        obj.deduplicated = deduplicated
        obj.existed = existed
        return obj


def check_dedup(dedup_key, dedup_window) -> tuple[str | None, float | None]:
    """(key, window seconds), both or neither.

    Raises:
        InvalidInput: a key that is not a str of 1 to 200 characters (field "dedup_key"), a
            window that is not a number of seconds from 0 (exclusive) to 30 days, or one
            without the other (field "dedup_window").
    """
    if dedup_key is None and dedup_window is None:
        return None, None
    if not isinstance(dedup_key, str) or not 1 <= len(dedup_key) <= 200:
        raise InvalidInput("dedup_key", f"must be a str of 1 to 200 characters with dedup_window, got {dedup_key!r}")
    if (
        isinstance(dedup_window, bool)
        or not isinstance(dedup_window, (int, float))
        or not 0 < dedup_window <= MAX_DEDUP_WINDOW
    ):
        raise InvalidInput(
            "dedup_window",
            f"must be seconds, above 0 and at most {MAX_DEDUP_WINDOW:.0f}, with dedup_key, got {dedup_window!r}",
        )
    return dedup_key, float(dedup_window)


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
    dedup_key: str | None = None,
    dedup_window: float | None = None,
    queue: tuple[str | None, int | None, str | None] = (None, None, None),
) -> Started:
    """Insert the workflow row inside the caller's transaction; idempotent on the id.

    ``queue`` is (queue, queue_limit, queue_rates JSON) from ``_ops.slots.queue_for``: a queue
    with a limit or a rate makes the insert trigger take a slot of its key too.

    With ``dedup_key``, under a lock on the key: the newest workflow of that key started less
    than ``dedup_window`` seconds ago (database clock) is returned instead, with
    ``deduplicated`` True, and nothing is written or cancelled.

    With a key, the row's insert trigger takes a free slot or queues the workflow; first
    ``on_conflict`` acts: cancel_running, when the holders fill the limit, requests their
    cancellation (by ``$concurrency:<wf_id>``) and ends the key's queued top-level starts
    (cancelled, never run), so the newest start takes the slot they release; replace_queued
    ends the queued top-level starts only; after the insert, reject raises when the workflow
    queued.

    Returns:
        the id (``Started``): ``wf_id``, or the deduplicated workflow's id.

    Raises:
        WorkflowConflict: the id belongs to another workflow name.
        ConcurrencyLimitReached: on_conflict "reject" and the key is full; the caller's
            transaction must roll back (``Runtime.start`` does), so nothing is written.
    """
    cur = conn.cursor(row_factory=dict_row)
    if key is not None or dedup_key is not None:
        existing = cur.execute(APPROVE_REQUEST_IN_SELECT_WORKFLOWS, (wf_id,)).fetchone()
        if existing is not None:
            return _existing(existing, wf_id, name)
    if dedup_key is not None:
        cur.execute(DEDUP_LOCK, (dedup_key,))
        first = cur.execute(DEDUP_FIND, (dedup_key, dedup_window)).fetchone()
        if first is not None:
            return Started(first["id"], deduplicated=first["id"] != wf_id)
    if key is not None:
        _before_insert(conn, cur, wf_id, key, limit or 1, on_conflict)
    # The workflow's spans descend from the caller's current span (rt.start's own, a child of a
    # Django request's): kept on the row, so every worker that runs it, after any crash, emits
    # them in that trace under that parent.
    trace_context = tracing.current_traceparent() if hooks.on else None
    row = cur.execute(
        START_INSERT_WORKFLOWS,
        (wf_id, name, version, input_json, priority, key, limit, dedup_key, *queue, trace_context),
    ).fetchone()
    if row is None:
        existing = cur.execute(APPROVE_REQUEST_IN_SELECT_WORKFLOWS, (wf_id,)).fetchone()
        return _existing(existing, wf_id, name)
    if key is not None and on_conflict == "reject":
        mine = [r for r in workflow_rows(conn, wf_id) if r["key"] == key]
        if mine and mine[0]["slot_no"] is None:
            holders = [r["workflow_id"] for r in key_rows(conn, key) if r["slot_no"] is not None]
            raise ConcurrencyLimitReached(key, limit or 1, holders)
    return Started(wf_id)


def _existing(existing, wf_id: str, name: str) -> Started:
    if existing and existing["name"] != name:
        raise WorkflowConflict(
            f"workflow_id: {wf_id!r} already belongs to the workflow {existing['name']!r}, not {name!r}"
        )
    return Started(wf_id, existed=True)


def _before_insert(conn, cur, wf_id: str, key: str, limit: int, on_conflict: str) -> None:
    # Lock order (ilr._ops.slots): cancel_in locks the holders' rows before the key's lock;
    # replace_queued takes the key's lock and then the queued rows without waiting.
    by = f"{CONCURRENCY_ACTOR}:{wf_id}"
    if on_conflict == "cancel_running":
        if _cancel_holders_of_a_full_key(conn, key, limit, by):
            # The newest start wins: an older start still waiting would otherwise take the slot
            # the cancelled holder releases, and a burst of cancel_running starts would run one
            # after the other (each found only the first holder running).
            _end_queued_starts(cur, key, wf_id, by)
    elif on_conflict == "replace_queued":
        _end_queued_starts(cur, key, wf_id, by)


CANCEL_RUNNING_TRIES = 20
"""How many times cancel_running decides again when the key's holders changed between its
guess and its key lock (each try follows a start, an admission or an end of the key)."""


def _holders(conn, key: str, limit: int) -> tuple[set[str], int]:
    """``key``'s live holders, and the limit in force: its live rows' (the one the insert
    trigger applies: a start asking another limit joins under it), else ``limit``."""
    rows = key_rows(conn, key)
    live = rows[0]["slot_limit"] if rows else limit
    return {r["workflow_id"] for r in rows if r["slot_no"] is not None}, live


def _cancel_holders_of_a_full_key(conn, key: str, limit: int, by: str) -> bool:
    """cancel_running's decision: when ``key``'s live holders fill ``limit``, request each one's
    cancel (``cancel_in``, by ``by``). The limit is the key's live one when it has live rows
    (``_holders``): the one that decides whether this start queues. Decided under the key's
    lock, which the caller's transaction keeps when this returns. Returns whether the key was
    full.

    The race (docs/protocol.md §5.4): holders read before the key's lock miss a start that
    takes the key meanwhile (of two simultaneous starts of an empty key, the second would queue
    behind the first, uncancelled). So the holders must be read under the key's lock, but their
    rows must be locked before it (the lock order: a holder's end holds its row and
    then waits for the key's lock), so the decision is a guess checked under the lock: in a
    savepoint, lock and cancel the holders read now when they fill the limit, take the key's
    lock, and read the holders again. Under the lock no holder can be added, and none of the
    rows this savepoint locked can end, so when the cancels done match what the holders under
    the lock call for (all of them when full, none when not), the decision is the one a start
    serialized at this point would make, and it stands. Otherwise the savepoint rolls back,
    which also gives back the key's lock and the rows' locks, and the next try guesses the
    holders read under the lock.

    A holder that never ran (queued for its queue's slot, or put off by a rate) ends at once
    when cancelled, and its release admits the key's next waiter inside this savepoint: the
    holders under the lock then include one this savepoint admitted, which
    ``_cancel_admitted_here`` cancels too.

    Raises:
        psycopg.OperationalError: the holders changed CANCEL_RUNNING_TRIES times in a row.
    """
    guess, guess_limit = _holders(conn, key, limit)
    for _ in range(CANCEL_RUNNING_TRIES):
        try:
            with conn.transaction():  # a savepoint
                cancelled = set()
                if len(guess) >= guess_limit:
                    for holder in sorted(guess):  # rows in id order: two such starts lock them alike
                        cancel_in(conn, holder, by=by)
                    cancelled = set(guess)
                conn.execute(LOCK_KEY, (key,))
                held, live = _holders(conn, key, limit)
                full = len(held) >= live
                if full and cancelled and held - cancelled:
                    held = _cancel_admitted_here(conn, key, limit, held, cancelled, by)
                if (held & cancelled) == (held if full else set()):
                    return full
                guess, guess_limit = held, live
                raise psycopg.Rollback()
        except psycopg.errors.LockNotAvailable:  # rolled back: a holder admitted elsewhere was busy
            guess, guess_limit = _holders(conn, key, limit)
    raise psycopg.OperationalError(
        f"concurrency_key {key!r}: its holders kept changing under on_conflict='cancel_running'"
    )


ADMITTED_LOCK_WAIT = "100ms"
"""The longest ``_cancel_admitted_here`` waits for a lock: past it the savepoint rolls back and
cancel_running decides again."""


def _cancel_admitted_here(conn, key: str, limit: int, held: set[str], cancelled: set[str], by: str) -> set[str]:
    """Under ``key``'s lock, cancel the holders that are not in ``cancelled`` (adding them to
    it) until none is left; returns the holders then.

    A retry instead would roll the admission back and guess the admitted waiter as the holder,
    whose cancel (it is queued again) lets the first holder hold again: no try would agree.

    The holders not in ``cancelled`` are waiters admitted by a cancelled holder's release in
    this savepoint: the admission locked their rows, so their cancels wait on nothing. But one
    may have been admitted by another transaction between the guess and the key's lock, and
    its row (a worker's) is locked after the key's lock here, against the lock order: a wait
    could close a cycle with that holder's end. So lock waits are bounded here
    (ADMITTED_LOCK_WAIT); past the bound, LockNotAvailable rolls the savepoint back and the
    caller decides again.
    """
    previous = conn.cursor(row_factory=dict_row).execute(SHORT_LOCK_WAITS, (ADMITTED_LOCK_WAIT,)).fetchone()["previous"]
    # Each round either ends a holder (one more live row of the key gone) or leaves every holder
    # cancelled (none left over): at most one round per live row, and one more.
    for _ in range(len(key_rows(conn, key)) + 1):
        extra = held - cancelled
        if not extra:
            break
        for holder in sorted(extra):
            cancel_in(conn, holder, by=by)
        cancelled |= extra
        held, _ = _holders(conn, key, limit)
    conn.execute(RESTORE_LOCK_WAITS, (previous,))
    return held


def _end_queued_starts(cur, key: str, wf_id: str, by: str) -> None:
    # Under the key's lock, then the queued rows: the lock order. Children are left alone: their
    # parents wait on them.
    cur.execute(LOCK_KEY, (key,))
    for row in cur.execute(LOCK_QUEUED_TOP_LEVEL, (key,)).fetchall():
        end_queued(cur, row["workflow_id"], by=by, why=f"replaced by {wf_id}")
