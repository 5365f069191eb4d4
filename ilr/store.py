"""The worker's fenced writes on the workflow row: record a step, suspend, finish.

Each function is one short transaction whose first statement is the fence (spec §5.2). Where
the whole write fits in one statement, the fence and the write are data-modifying CTEs of that
statement: one round trip, one commit, and a zero-row fence inserts nothing.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg

from ilr import db
from ilr.errors import Fenced, Suspend

RECORD_STEP_SQL = """
with f as (
  update ilr.workflows
     set lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now(), takeovers = 0
   where id = %(wf)s and epoch = %(epoch)s and status = 'running' and lease_expires_at > now()
  returning id, cancel_requested_at, now() as now),
s as (
  insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, error, epoch)
  select f.id, %(seq)s, %(name)s, %(kind)s, %(fingerprint)s, %(output)s::jsonb, %(error)s::jsonb, %(epoch)s
    from f
  returning seq)
select f.cancel_requested_at, f.now, (select count(*) from s) as inserted from f
"""


def record_step(conn: psycopg.Connection, run, *, seq: int, kind: str, name: str,
                output_json: str | None = None, error_json: str | None = None,
                fingerprint: str | None = None) -> dict:
    """Insert the step row at ``seq`` in one fenced statement (one commit), and reset
    ``takeovers`` (a recorded step ends a crash loop, design-notes §5).

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
    row = conn.execute(RECORD_STEP_SQL, {
        "ttl": run.lease_ttl, "wf": run.workflow_id, "epoch": run.epoch, "seq": seq, "name": name,
        "kind": kind, "fingerprint": fingerprint, "output": output_json, "error": error_json,
    }).fetchone()
    if row is None:
        raise Fenced(f"workflow {run.workflow_id}: epoch {run.epoch} lost its claim before recording seq {seq}")
    run.renewed(t0, row["cancel_requested_at"])
    return row


def suspend(conn: psycopg.Connection, run, *, seq: int, kind: str, name: str,
            signal: str | None = None, until: str | None = None, seconds: float | None = None,
            attempt: int | None = None) -> tuple[str, Any]:
    """The suspend transaction (spec §5.6): consume a waiting signal, record a due timer, or
    release the row as sleeping.

    Because the fence locks the workflow row first, a concurrent signal_in or cancel_in either
    committed before this transaction (and the mailbox read below sees its row) or waits for
    the lock (and then finds the row sleeping and wakes it): no lost wakeup (NoLostWakeup).

    Args:
        kind: "sleep", "signal" or "retry" (a retry records no step row, spec §5.5).
        signal: the signal name, for kind "signal".
        until: the recorded deadline (timestamptz text) when this seq suspended before.
        seconds: the timeout from now() for a first suspend; None with no ``until`` means
            wait forever (available_at = 'infinity').
        attempt: the next attempt number, for kind "retry".

    Returns:
        ("signal", payload) when a signal was consumed, or ("timeout", None) when the timer
        was due (the step row is recorded in both cases).

    Raises:
        Suspend: the workflow now sleeps; the worker unwinds and releases the run.
        Fenced: the claim is no longer current; nothing was written.
    """
    t0 = run.clock()
    with conn.transaction():
        cur = conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        deadline = cur.execute(
            "select to_jsonb(d) as until, d <= now() as due from "
            "(select coalesce(%s::timestamptz, now() + make_interval(secs => %s)) as d) x",
            (until, seconds),
        ).fetchone()
        until_json = deadline["until"]  # a JSON string, or None when waiting forever
        if kind == "signal":
            sig = cur.execute(
                "select id, payload from ilr.signals where workflow_id = %s and name = %s "
                "and consumed_seq is null order by id limit 1 for update",
                (run.workflow_id, signal),
            ).fetchone()
            if sig is not None:
                cur.execute("update ilr.signals set consumed_seq = %s where id = %s", (seq, sig["id"]))
                _insert_step(cur, run, seq, kind, name, json.dumps(sig["payload"]))
                result = ("signal", sig["payload"])
                run.renewed(t0, fence["cancel_requested_at"])
                return result
        if kind != "retry" and deadline["due"]:
            output = json.dumps({"until": until_json}) if kind == "sleep" else None
            _insert_step(cur, run, seq, kind, name, output)
            run.renewed(t0, fence["cancel_requested_at"])
            return ("timeout", None)
        waiting = {"seq": seq, "kind": kind, "until": until_json}
        if signal is not None:
            waiting["signal"] = signal
        if attempt is not None:
            waiting["attempt"] = attempt
        cur.execute(
            "update ilr.workflows set status = 'sleeping', owner = null, lease_expires_at = null, "
            "waiting = %s::jsonb, available_at = coalesce((%s::jsonb #>> '{}')::timestamptz, 'infinity'), "
            "updated_at = now() where id = %s",
            (json.dumps(waiting), json.dumps(until_json), run.workflow_id),
        )
    run.released = True
    raise Suspend()


def _insert_step(cur, run, seq, kind, name, output_json, error_json=None, fingerprint=None):
    # Inside a transaction the fence already ran: the row lock is held, so this insert is
    # covered by the fence. takeovers resets with every recorded step (design-notes §5).
    cur.execute(
        "insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, error, epoch) "
        "values (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s)",
        (run.workflow_id, seq, name, kind, fingerprint, output_json, error_json, run.epoch),
    )
    cur.execute("update ilr.workflows set takeovers = 0 where id = %s", (run.workflow_id,))


FINISH_SQL = """
update ilr.workflows
   set status = %(status)s, result = %(result)s::jsonb, error = %(error)s::jsonb, owner = null,
       lease_expires_at = null, waiting = null, updated_at = now()
 where id = %(wf)s and epoch = %(epoch)s and status = 'running' and lease_expires_at > now()
returning parent_id
"""


def finish(conn: psycopg.Connection, run, status: str, *, result_json: str | None = None,
           error_json: str | None = None) -> dict:
    """End the workflow with a terminal status, fenced (completed, failed, cancelled, stuck).

    A child's terminal write also wakes its parent when the parent waits on it (spec §5.8).

    Raises:
        Fenced: the claim is no longer current; nothing was written.
    """
    with conn.transaction():
        cur = conn.cursor()
        row = cur.execute(FINISH_SQL, {"status": status, "result": result_json, "error": error_json,
                                       "wf": run.workflow_id, "epoch": run.epoch}).fetchone()
        if row is None:
            raise Fenced(f"workflow {run.workflow_id}: epoch {run.epoch} lost its claim before finishing")
        if row["parent_id"]:
            wake_parent(cur, row["parent_id"], run.workflow_id)
    return row


def wake_parent(cur, parent_id: str, child_id: str) -> None:
    """Wake ``parent_id`` when it sleeps waiting on ``child_id`` (spec §5.8)."""
    cur.execute(
        "update ilr.workflows set available_at = now(), updated_at = now() "
        "where id = %s and status = 'sleeping' and waiting->>'kind' = 'child' and waiting->>'child' = %s",
        (parent_id, child_id),
    )


def mark_stuck_unfenced(conn: psycopg.Connection, run, error_json: str) -> bool:
    """Mark the workflow stuck after a swallowed Suspend (spec §13.3.8).

    The suspend transaction already released the row, so the fence cannot match; the write is
    guarded by the unchanged epoch instead: if another worker claimed since, it does nothing.

    Returns:
        True when the row was marked stuck.
    """
    row = conn.execute(
        "update ilr.workflows set status = 'stuck', error = %s::jsonb, owner = null, "
        "lease_expires_at = null, updated_at = now() where id = %s and epoch = %s "
        "and status in ('sleeping', 'pending') returning id",
        (error_json, run.workflow_id, run.epoch),
    ).fetchone()
    return row is not None
