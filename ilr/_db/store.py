"""The worker's fenced writes on the workflow row: record a step, suspend, finish, start a
child, wait on a child, continue-as-new.

Each function is one short transaction whose first statement is the fence (docs/protocol.md
§3.2). Where the whole write fits in one statement, the fence and the write are data-modifying
CTEs of that statement: one round trip, one commit, and a zero-row fence inserts nothing.

Lock order between workflows (docs/protocol.md §2, §5.3): a parent's row before its child's.
The parent's own writes fence the parent first and then touch the child (start_child, wait_child); a
child's terminal writes (finish, continue_as_new, mark_stuck_unfenced) lock the parent's row
before their fence, so a child ending, its parent suspending on it and ``cancel_in`` of the
parent (parent, then children) never deadlock.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from ilr import _db as db
from ilr._db import batch
from ilr._errors import Fenced, InvalidInput, SignalTimeout, Suspend
from ilr._queries.misc import SUSPEND_SELECT_SQL, WAIT_CHILD_SELECT_SQL
from ilr._queries.signals import SUSPEND_LOCK_SIGNALS, SUSPEND_UPDATE_SIGNALS
from ilr._queries.workflows import (
    ANCESTORS_SQL,
    CHILD_ROW,
    FINISH_SQL,
    INSERT_STEP_SQL,
    INSERT_STEP_UPDATE_WORKFLOWS,
    LOCK_PARENT_LOCK_WORKFLOWS,
    MARK_STUCK_UNFENCED_UPDATE_WORKFLOWS,
    PARENT_KEY_SELECT_WORKFLOWS,
    RECORD_STEP_SQL,
    START_CHILD_INSERT_WORKFLOWS,
    START_CHILD_SELECT_WORKFLOWS,
    SUSPEND_UPDATE_WORKFLOWS,
    WAIT_CHILD_UPDATE_WORKFLOWS,
    WAKE_PARENT_UPDATE_WORKFLOWS,
)
from ilr._statuses import TERMINAL
from ilr._telemetry import hooks, tracing

MAX_ID_LENGTH = 200
INHERITED_CHILD_POLL = 1.0
"""Seconds between checks when a fork waits on a child of the workflow it was forked from: the
child's terminal write wakes only its own parent, so the fork polls."""


def record_step(
    conn: db.Connection,
    run,
    *,
    seq: int,
    kind: str,
    name: str,
    output_json: str | None = None,
    error_json: str | None = None,
    fingerprint: str | None = None,
) -> dict:
    """Insert the step row at ``seq`` in one fenced statement (one commit), and reset
    ``takeovers`` (a recorded step ends a crash loop, docs/protocol.md §3.4).

    Args:
        run: the worker's Run (workflow_id, epoch, lease_ttl; its local lease is renewed).
        output_json / error_json: already-validated JSON text, or None.

    Returns:
        the fence row {"cancel_requested_at", "now", "inserted"}.

    Raises:
        Fenced: the claim is no longer current; nothing was written (StepResultUnique,
            FencedWrites).
    """
    t0 = run.clock()
    _count(run, seq, output_json, error_json)
    row = batch.one(
        conn,
        RECORD_STEP_SQL,
        {
            "ttl": run.lease_ttl,
            "wf": run.workflow_id,
            "epoch": run.epoch,
            "seq": seq,
            "name": name,
            "kind": kind,
            "fingerprint": fingerprint,
            "output": output_json,
            "error": error_json,
        },
    ).fetchone()
    if row is None:
        raise Fenced(f"workflow {run.workflow_id}: epoch {run.epoch} lost its claim before recording seq {seq}")
    run.renewed(t0, row["cancel_requested_at"])
    return row


def suspend(
    conn: db.Connection,
    run,
    *,
    seq: int,
    kind: str,
    name: str,
    signal: str | None = None,
    until: str | None = None,
    seconds: float | None = None,
    attempt: int | None = None,
    timeout: float | None = None,
    last_error: dict | None = None,
) -> tuple[str, Any]:
    """The suspend transaction (docs/protocol.md §5.1): consume a waiting signal, record a due
    timer, or release the row as sleeping.

    Because the fence locks the workflow row first, a concurrent signal_in or cancel_in either
    committed before this transaction (the mailbox read below sees its signal; a cancel this
    run has not seen makes the released row due now) or waits for the lock (and then finds the
    row sleeping and wakes it): no lost wakeup (NoLostWakeup).

    Args:
        kind: "sleep", "signal" or "retry" (a retry records no step row, docs/protocol.md §4).
        signal: the signal name, for kind "signal".
        until: the recorded deadline (timestamptz text) when this seq suspended before.
        seconds: the timeout from now() for a first suspend; None with no ``until`` means
            wait forever (available_at = 'infinity').
        attempt: the next attempt number, for kind "retry".
        timeout: the wait's timeout in seconds, for kind "signal" (recorded with a timeout).
        last_error: for kind "retry", the failed attempt {"type", "message", "attempt"[, "at"]},
            kept in ``waiting["last_error"]``; "at" (database clock, ISO text) is added when absent.

    Returns:
        ("signal", payload) when a signal was consumed, or ("timeout", None) when the timer
        was due. The step row is recorded in both cases: a consumed signal as its payload with
        fingerprint ``signal:<id>``, a signal wait's timeout as the error {"type":
        "SignalTimeout", "message", "signal", "timeout", "until"} with a NULL output.

    Raises:
        Suspend: the workflow now sleeps; the worker unwinds and releases the run.
        Fenced: the claim is no longer current; nothing was written.
    """
    t0 = run.clock()
    with conn.transaction():
        cur = conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        deadline = cur.execute(
            SUSPEND_SELECT_SQL,
            (until, seconds),
        ).fetchone()
        assert deadline is not None  # a select over a one-row subquery returns one row
        until_json = deadline["until"]  # a JSON string, or None when waiting forever
        if kind == "signal":
            sig = cur.execute(
                SUSPEND_LOCK_SIGNALS,
                (run.workflow_id, signal),
            ).fetchone()
            if sig is not None:
                cur.execute(SUSPEND_UPDATE_SIGNALS, (seq, sig["id"]))
                insert_step(cur, run, seq, kind, name, json.dumps(sig["payload"]), fingerprint=f"signal:{sig['id']}")
                result = ("signal", sig["payload"])
                run.renewed(t0, fence["cancel_requested_at"])
                return result
        if kind != "retry" and deadline["due"]:
            output = json.dumps({"until": until_json}) if kind == "sleep" else None
            error = None
            if kind == "signal":
                # cast: kind "signal" comes with its signal name (ctx.wait_signal passes both).
                message = str(SignalTimeout(cast(str, signal), timeout))
                error = json.dumps(
                    {
                        "type": "SignalTimeout",
                        "message": message,
                        "signal": signal,
                        "timeout": timeout,
                        "until": until_json,
                    }
                )
            insert_step(cur, run, seq, kind, name, output, error)
            run.renewed(t0, fence["cancel_requested_at"])
            return ("timeout", None)
        waiting = {"seq": seq, "kind": kind, "name": name, "until": until_json}
        if signal is not None:
            waiting["signal"] = signal
        if attempt is not None:
            waiting["attempt"] = attempt
        if last_error is not None:
            waiting["last_error"] = {"at": deadline["now"], **last_error}
        # A cancel that committed while this run was running (after its claim or last fenced
        # write) set cancel_requested_at but left available_at alone: the row was running. The
        # fence above holds the row lock, so that cancel is visible here; release the row due now
        # instead of at its deadline, so that the next claim delivers the cancel at this call
        # (NoLostWakeup for cancels: a sleep of an hour or a wait forever would keep it).
        unseen_cancel = fence["cancel_requested_at"] is not None and not run.cancel_requested
        cur.execute(
            SUSPEND_UPDATE_WORKFLOWS,
            (json.dumps(waiting), unseen_cancel, json.dumps(until_json), run.workflow_id),
        )
    run.released = True
    raise Suspend()


def insert_step(
    cur, run, seq, kind, name, output_json, error_json=None, fingerprint=None, *, reset_takeovers=True, execute=None
):
    """Insert the step row at ``seq`` inside a transaction that fenced already (``cur``'s)."""
    # Inside a transaction the fence already ran: the row lock is held, so this insert is
    # covered by the fence. takeovers resets with every recorded step (docs/protocol.md §3.4); a
    # caller whose fence already reset it passes reset_takeovers=False. ``execute`` runs the
    # insert in place of cur.execute: journal.Chain.also folds it into the journal INSERT.
    _count(run, seq, output_json, error_json)
    (execute or cur.execute)(
        INSERT_STEP_SQL, (run.workflow_id, seq, name, kind, fingerprint, output_json, error_json, run.epoch)
    )
    if reset_takeovers:
        cur.execute(INSERT_STEP_UPDATE_WORKFLOWS, (run.workflow_id,))


def _count(run, seq: int, output_json: str | None, error_json: str | None) -> None:
    """Count the row a run writes at ``seq`` in its history's size (``_context.history``).

    Counted before the write: a write that fails ends the run (fenced, or a fault that
    abandons it), and the next run counts its history again as it replays it."""
    history = getattr(run, "history", None)
    if history is not None:
        history.recorded(seq, output_json, error_json)


def lock_parent(cur, run) -> None:
    """Lock the run's parent's row, if it has one (lock order: parent, then child)."""
    # Lock order: the parent's row before the child's (module docstring).
    parent_id = getattr(run, "parent_id", None)
    if parent_id:
        cur.execute(LOCK_PARENT_LOCK_WORKFLOWS, (parent_id,))


def finish(
    conn: db.Connection,
    run,
    status: str,
    *,
    result_json: str | None = None,
    error_json: str | None = None,
    after=None,
) -> dict:
    """End the workflow with a terminal status, fenced (completed, failed, cancelled, stuck).

    A child's terminal write also wakes its parent when the parent waits on it; the parent's
    row is locked first (lock order parent, then child; docs/protocol.md §5.3). ``after(cur)``,
    when given, runs in the same transaction after the end (the parent close policies).

    Returns:
        {"parent_id"} of the finished workflow.

    Raises:
        Fenced: the claim is no longer current; nothing was written.
    """
    params = {"status": status, "result": result_json, "error": error_json, "wf": run.workflow_id, "epoch": run.epoch}
    if not getattr(run, "parent_id", None) and after is None:
        # No parent to lock or wake: the fenced UPDATE alone, one statement and one commit.
        row = batch.one(conn, FINISH_SQL, params).fetchone()
        if row is None:
            raise Fenced(f"workflow {run.workflow_id}: epoch {run.epoch} lost its claim before finishing")
        return row
    with conn.transaction():
        cur = conn.cursor()
        lock_parent(cur, run)
        row = cur.execute(FINISH_SQL, params).fetchone()
        if row is None:
            raise Fenced(f"workflow {run.workflow_id}: epoch {run.epoch} lost its claim before finishing")
        if row["parent_id"]:
            wake_parent(cur, row["parent_id"], run.workflow_id)
        if after is not None:
            after(cur)
    return row


def wake_parent(cur, parent_id: str, child_id: str) -> None:
    """Wake ``parent_id`` when it sleeps waiting on ``child_id`` (docs/protocol.md §5.3)."""
    cur.execute(
        WAKE_PARENT_UPDATE_WORKFLOWS,
        (parent_id, child_id),
    )


# -- children and continue-as-new (docs/protocol.md §5.3) ----------------------------------


def successor_id(wf_id: str, continued_from: str | None) -> str:
    """The id continue-as-new gives the next run: ``<id>#1`` for a first run, ``<base>#<n+1>``
    for run ``<base>#<n>`` (a run that has ``continued_from``; docs/protocol.md §5.3)."""
    if continued_from is not None:
        m = re.fullmatch(r"(.*)#(\d+)", wf_id, flags=re.DOTALL)
        if m:
            return f"{m.group(1)}#{int(m.group(2)) + 1}"
    return f"{wf_id}#1"


def start_child(
    conn: db.Connection,
    run,
    *,
    seq: int,
    step_name: str,
    child_id: str,
    name: str,
    version: str,
    input_json: str,
    output_json: str,
    fingerprint: str | None = None,
    concurrency_key: str | None = None,
    concurrency_limit: int | None = None,
    queue: tuple[str | None, int | None, str | None] = (None, None, None),
    parent_close_policy: str = "request_cancel",
) -> None:
    """``ctx.child``'s write: the parent's ``child`` step row and the child's workflow row
    (``parent_id`` set) in one fenced transaction (docs/protocol.md §5.3). A cancel already
    requested on the parent is carried onto the child, so a cancel never misses a child.

    Args:
        run: the parent's Run.
        step_name: the step row's name ("start:<name>").
        fingerprint: the child id when the workflow chose it, else None.
        concurrency_key, concurrency_limit: the child's key and limit, or None (its insert
            trigger takes a slot or queues it; docs/protocol.md §5.4).
        queue: the child's (queue, queue_limit, queue_rates JSON), or Nones.
        parent_close_policy: what the parent's end does to the child (docs/protocol.md §5.6).
        output_json: the step output ({"child_id", "name", "version"}).

    Raises:
        InvalidInput: a workflow with ``child_id`` already exists (field "id"), under another
            parent, this one, or none; or the child's key is the parent's own (field
            "concurrency_key": it would wait for its parent forever); the transaction rolls
            back, nothing is written.
        Fenced: the claim is no longer current; nothing was written.
    """
    t0 = run.clock()
    with conn.transaction():
        cur = conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        if concurrency_key is not None:
            own = cur.execute(PARENT_KEY_SELECT_WORKFLOWS, (run.workflow_id,)).fetchone()
            if own is not None and own["concurrency_key"] == concurrency_key:
                # The parent holds its key until it ends and would wait on the child, which
                # would wait for the key: neither would ever run again.
                raise InvalidInput(
                    "concurrency_key",
                    f"the child would queue for {concurrency_key!r}, which its parent holds until it ends "
                    "while it waits on the child; give the child another key, or none",
                )
        inserted = cur.execute(
            START_CHILD_INSERT_WORKFLOWS,
            (
                child_id,
                name,
                version,
                input_json,
                run.workflow_id,
                fence["cancel_requested_at"],
                concurrency_key,
                concurrency_limit,
                *queue,
                parent_close_policy,
                # The child's spans descend from its parent's workflow span, in its parent's trace.
                tracing.child_traceparent(run) if hooks.on or run.trace_context else None,
            ),
        ).fetchone()
        if inserted is None:
            existing = cur.execute(START_CHILD_SELECT_WORKFLOWS, (child_id,)).fetchone() or {}
            parent = existing.get("parent_id")
            if parent == run.workflow_id:
                where = "as a child of this workflow, started at another call"
            elif parent:
                where = f"under another parent ({parent!r})"
            else:
                where = f"as a top-level {existing.get('name')} workflow"
            raise InvalidInput("id", f"child id {child_id!r} already exists {where}; a child id must be new")
        insert_step(cur, run, seq, "child", step_name, output_json, fingerprint=fingerprint)
    run.renewed(t0, fence["cancel_requested_at"])


def wait_child(
    conn: db.Connection,
    run,
    *,
    seq: int,
    name: str,
    child_id: str,
    until: str | None = None,
    seconds: float | None = None,
) -> dict:
    """``ctx.wait_child``'s suspend transaction (docs/protocol.md §5.3).

    Fences the parent, then reads the child's row FOR SHARE (lock order parent, child): a
    child's terminal write either committed before this read (and it is seen) or waits for
    this commit and then finds the parent sleeping and wakes it (no lost wakeup). A child that
    continued-as-new is followed to the last run of its chain.

    Args:
        name: the step name ("wait:<id>").
        until: the recorded deadline when this seq suspended before; seconds: the timeout from
            now() for a first suspend; neither: wait forever.

    Returns:
        the recorded outcome {"child", "status", "result", "error"} when the child ended, or
        {"child", "status": "timeout", "until"} when the deadline passed (the ``child`` step
        row is written in both cases).

    Raises:
        Suspend: the parent now sleeps with waiting {seq, kind: "child", name, child, until}.
        InvalidInput: no such workflow, or not a child of this workflow (nor of a workflow it
            was forked from) (field "id"); nothing is written.
        Fenced: the claim is no longer current; nothing was written.
    """
    t0 = run.clock()
    with conn.transaction():
        cur = conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        deadline = cur.execute(
            WAIT_CHILD_SELECT_SQL,
            (until, seconds),
        ).fetchone()
        assert deadline is not None  # a select over a one-row subquery returns one row
        child = cur.execute(CHILD_ROW, (child_id,)).fetchone()
        if child is None:
            raise InvalidInput("id", f"no workflow {child_id!r}: wait_child takes the id ctx.child returned")
        inherited = False
        if child["parent_id"] != run.workflow_id:
            ancestors = {r["id"] for r in cur.execute(ANCESTORS_SQL, (run.workflow_id,)).fetchall()}
            if child["parent_id"] is None or child["parent_id"] not in ancestors:
                raise InvalidInput(
                    "id",
                    f"workflow {child_id!r} is not a child of {run.workflow_id!r} "
                    f"(its parent is {child['parent_id']!r})",
                )
            inherited = True  # a fork waiting on a child its original started: polled
        tail = child
        while tail["status"] == "continued":
            nxt = cur.execute(CHILD_ROW, (successor_id(tail["id"], tail["continued_from"]),)).fetchone()
            if nxt is None:
                break
            tail = nxt
        outcome = None
        if tail["status"] in TERMINAL:
            outcome = {"child": tail["id"], "status": tail["status"], "result": tail["result"], "error": tail["error"]}
        elif deadline["due"]:
            outcome = {"child": tail["id"], "status": "timeout", "until": deadline["until"]}
        if outcome is not None:
            insert_step(cur, run, seq, "child", name, json.dumps(outcome))
            run.renewed(t0, fence["cancel_requested_at"])
            return outcome
        waiting = {"seq": seq, "kind": "child", "name": name, "child": tail["id"], "until": deadline["until"]}
        cur.execute(
            WAIT_CHILD_UPDATE_WORKFLOWS,
            (json.dumps(waiting), json.dumps(deadline["until"]), inherited, INHERITED_CHILD_POLL, run.workflow_id),
        )
    run.released = True
    raise Suspend()


def mark_stuck_unfenced(conn: db.Connection, run, error_json: str) -> bool:
    """Mark the workflow stuck after a swallowed Suspend (docs/protocol.md §4).

    The suspend transaction already released the row, so the fence cannot match; the write is
    guarded by the unchanged epoch instead: if another worker claimed since, it does nothing.
    A waiting parent is woken (stuck is terminal for ``wait_child``).

    Returns:
        True when the row was marked stuck.
    """
    with conn.transaction():
        cur = conn.cursor()
        lock_parent(cur, run)
        row = cur.execute(
            MARK_STUCK_UNFENCED_UPDATE_WORKFLOWS,
            (error_json, run.workflow_id, run.epoch),
        ).fetchone()
        if row is not None and row["parent_id"]:
            wake_parent(cur, row["parent_id"], run.workflow_id)
    if row is not None:
        run.ended = "stuck"
    return row is not None
