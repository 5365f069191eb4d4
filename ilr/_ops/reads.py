"""Reads of workflows for the client: one workflow described, a filtered list, and the wait for
an outcome (``Runtime.describe``, ``Runtime.list``, ``Runtime.result``)."""

from __future__ import annotations

import time
from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr import _db as db
from ilr._conf import settings
from ilr._context.history import past, payload_bytes
from ilr._errors import InvalidInput, WorkflowFailed, WorkflowNotFound
from ilr._ops.slots import describe_workflow
from ilr._queries.effects import DESCRIBE_ON_SELECT_EFFECTS
from ilr._queries.signals import DESCRIBE_ON_SELECT_SIGNALS
from ilr._queries.steps import DESCRIBE_ON_SELECT_STEPS, HISTORY_SIZE_SELECT_STEPS
from ilr._queries.workflows import (
    DESCRIBE_ON_SELECT_WORKFLOWS,
    DESCRIBE_ON_SELECT_WORKFLOWS_2,
    RESULT_SELECT_WORKFLOWS,
    RESULT_SELECT_WORKFLOWS_2,
    workflow_list_sql,
)
from ilr._statuses import STATUSES

MAX_LIST_LIMIT = 10_000
"""The most rows ``Runtime.list`` returns."""


def describe_on(conn: db.Connection, wf_id: str) -> dict:
    """The workflow row with its steps, effects, signals, children and waiting state, on ``conn``
    (as ``Runtime.describe`` returns it); "concurrency" lists its keys (``_ops.slots.describe_workflow``):
    the slot it holds, or its place in the queue and who holds the key.

    Raises:
        WorkflowNotFound: no workflow has this id.
    """
    wf = conn.execute(DESCRIBE_ON_SELECT_WORKFLOWS, (wf_id,)).fetchone()
    if wf is None:
        raise WorkflowNotFound(wf_id)
    wf["steps"] = conn.execute(
        DESCRIBE_ON_SELECT_STEPS,
        (wf_id,),
    ).fetchall()
    # Measured as the run measures it (ctx.history_length, ctx.history_bytes), from the rows read.
    size = sum(payload_bytes(s["output"]) + payload_bytes(s["error"]) for s in wf["steps"])
    wf["history"] = history_figures(len(wf["steps"]), size)
    wf["effects"] = conn.execute(DESCRIBE_ON_SELECT_EFFECTS, (wf_id,)).fetchall()
    wf["signals"] = conn.execute(DESCRIBE_ON_SELECT_SIGNALS, (wf_id,)).fetchall()
    wf["children"] = [r["id"] for r in conn.execute(DESCRIBE_ON_SELECT_WORKFLOWS_2, (wf_id,)).fetchall()]
    wf["last_error"] = (wf["waiting"] or {}).get("last_error")
    keyed = wf["concurrency_key"] is not None or wf["queue_limit"] is not None or wf["holds_locks"]
    wf["concurrency"] = describe_workflow(conn, wf_id) if keyed else []
    # A failed workflow's traceback is kept in its error object; shown apart from it.
    wf["traceback"] = wf["error"].pop("traceback", None) if isinstance(wf["error"], dict) else None
    return wf


def history_figures(length: int, size: int) -> dict:
    """A history's figures against the ILR_HISTORY_* settings: {"length", "bytes",
    "continue_as_new_suggested" (past a warning threshold), "warning" (a sentence saying which,
    or None), "limit_steps", "limit_bytes"}."""
    over = []
    if past(length, settings.HISTORY_WARN_STEPS):
        over.append(f"{length:,} step rows, past ILR_HISTORY_WARN_STEPS {settings.HISTORY_WARN_STEPS:,}")
    if past(size, settings.HISTORY_WARN_BYTES):
        over.append(f"{size:,} bytes, past ILR_HISTORY_WARN_BYTES {settings.HISTORY_WARN_BYTES:,}")
    return {
        "length": length,
        "bytes": size,
        "continue_as_new_suggested": bool(over),
        "warning": ("history of " + " and ".join(over) + ": continue as new") if over else None,
        "limit_steps": settings.HISTORY_LIMIT_STEPS,
        "limit_bytes": settings.HISTORY_LIMIT_BYTES,
    }


def history_on(conn: db.Connection, wf_id: str) -> dict:
    """One workflow's history size against the ILR_HISTORY_* settings, on ``conn`` (a psycopg
    connection: ``connect()``, or Django's ``connection.connection``): one
    aggregate over its step rows (the admin's history line). Shape: ``history_figures``.

    ``bytes`` here is the length of each payload's JSON text as PostgreSQL writes it, which is
    ``ctx.history_bytes``'s measure except for numbers written in exponent form (1e-07 is
    0.0000001 in PostgreSQL's text); ``rt.describe(id)["history"]`` measures as the run does.
    """
    row = conn.cursor(row_factory=dict_row).execute(HISTORY_SIZE_SELECT_STEPS, (wf_id,)).fetchone()
    assert row is not None  # an aggregate without group by returns one row
    return history_figures(row["length"], row["bytes"])


def list_query(
    status: str | None = None, name: str | None = None, version: str | None = None, limit: int = 100
) -> tuple[str, tuple]:
    """The statement and parameters of ``Runtime.list``: workflow rows (no steps), newest first,
    filtered by status, name and version. Checks its input before any connection is opened.

    Raises:
        InvalidInput: an unknown status, a name or version that is not an id, a bad limit.
    """
    if status is not None and status not in STATUSES:
        raise InvalidInput("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST_LIMIT:
        raise InvalidInput("limit", f"must be an integer from 1 to {MAX_LIST_LIMIT}, got {limit!r}")
    clauses, params = [], []
    for column, value in (("status", status), ("name", name), ("version", version)):
        if value is not None:
            clauses.append(f"{column} = %s")
            params.append(codec.check_text(value, column))
    where = f"where {' and '.join(clauses)}" if clauses else ""
    return workflow_list_sql(where), (*params, limit)


def outcome_on(conn: db.Connection, wf_id: str) -> tuple[dict | None, dict | None]:
    """(status, result, error of ``wf_id`` or None, its successor's id row when it continued as
    new, else None), on ``conn``."""
    row = conn.execute(RESULT_SELECT_WORKFLOWS, (wf_id,)).fetchone()
    successor = None
    if row is not None and row["status"] == "continued":
        successor = conn.execute(RESULT_SELECT_WORKFLOWS_2, (wf_id,)).fetchone()
    return row, successor


def wait_result(read, wf_id: str, timeout: float | None, poll: float) -> Any:
    """``Runtime.result``'s loop: ``read(id)`` (``outcome_on``) every ``poll`` seconds until the
    chain from ``wf_id`` ends; its result, or WorkflowFailed, TimeoutError, WorkflowNotFound."""
    deadline = None if timeout is None else time.monotonic() + timeout
    current = wf_id
    while True:
        row, successor = read(current)
        if row is None:
            raise WorkflowNotFound(current)
        if row["status"] == "completed":
            return row["result"]
        if row["status"] in ("failed", "cancelled", "stuck", "terminated"):
            raise WorkflowFailed(current, row["status"], row["error"])
        if successor is not None:
            current = successor["id"]
            continue
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"workflow {current} did not end within {timeout} s (status {row['status']})")
        time.sleep(poll)
