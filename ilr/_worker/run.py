"""Run one claimed workflow's code and record how it ended (docs/protocol.md §3.2, §3.4)."""

from __future__ import annotations

import json
import logging
import traceback

from ilr import _codec as codec
from ilr import _db as db
from ilr import _registry as registry
from ilr._context.context import ContinuedAsNew, WorkflowContext, dumps_error
from ilr._db import store
from ilr._errors import Cancelled, Fenced, InvalidInput, Suspend
from ilr._telemetry import hooks
from ilr._worker.claims import Run

log = logging.getLogger("ilr.worker")

TRACEBACK_LIMIT = 8000
"""At most this many characters of a failed workflow's traceback are kept (``error["traceback"]``)."""

_MESSAGE_LIMIT = 1000  # of the exception's own line(s) in a cut traceback: the frames matter more


def traceback_text(exc: BaseException, limit: int = TRACEBACK_LIMIT) -> str:
    """The formatted traceback of ``exc`` (with its chained causes), at most ``limit`` characters.

    Cut from the front, where the outermost frames are (the runtime's own): the innermost frames,
    which name the raising function, and the exception's line are what a reader needs. The
    exception's line is cut to 1000 characters first, so that a long message cannot push every
    frame out.
    """
    text = "".join(traceback.format_exception(exc))
    if len(text) <= limit:
        return text
    last = "".join(traceback.format_exception_only(type(exc), exc))
    frames = text[: len(text) - len(last)] if text.endswith(last) else text
    if len(last) > _MESSAGE_LIMIT:
        last = last[:_MESSAGE_LIMIT] + " [cut]\n"
    head = "Traceback (most recent call last):\n  [outer frames cut]\n"
    room = limit - len(head) - len(last)
    if len(frames) > room:
        tail = frames[len(frames) - room :]
        frames = head + tail[tail.find("\n") + 1 :]  # from a line's start
    return (frames + last)[-limit:]


def _failed_error(exc: BaseException) -> str:
    """The error of a workflow that failed with ``exc``: ``dumps_error`` plus its bounded
    traceback under "traceback" (``rt.describe`` shows it apart from the error)."""
    body = json.loads(dumps_error(exc))
    body["traceback"] = traceback_text(exc)
    return json.dumps(body)


def run_workflow(conn: db.Connection, run: Run, *, worker_id: str, dsn: str, max_takeovers: int) -> None:
    """Run the claimed workflow ``run`` (see ``_run_workflow``), inside its run span and with its
    run metrics when telemetry is on (``ilr._telemetry.hooks``)."""
    if not hooks.on:
        _run_workflow(conn, run, worker_id=worker_id, dsn=dsn, max_takeovers=max_takeovers)
        return
    hooks.run_started(run, worker_id, run.schedule_to_start)
    outcome, error = "returned", None  # type: tuple[str, BaseException | None]
    try:
        _run_workflow(conn, run, worker_id=worker_id, dsn=dsn, max_takeovers=max_takeovers)
        outcome = run.ended or ("suspended" if run.context is None or run.context.suspended else "returned")
    except Fenced as exc:
        outcome, error = "fenced", exc
        raise
    except BaseException as exc:
        outcome, error = "abandoned", exc
        raise
    finally:
        hooks.run_ended(run, outcome, error)


def _run_workflow(conn: db.Connection, run: Run, *, worker_id: str, dsn: str, max_takeovers: int) -> None:
    """Run the claimed workflow ``run`` on ``conn`` and record how it ended: CrashLoop (stuck)
    past ``max_takeovers``, completed with its result, failed (HistoryLimitExceeded when a
    durable call met a history limit, whatever the code did after), cancelled, stuck on
    NonDeterminism or a swallowed Suspend; nothing when it suspended or continued as new.

    Raises:
        Fenced: the run lost its claim. A connection fault: the database, not the workflow,
            failed (the worker abandons the run).
    """
    if run.takeovers > max_takeovers:
        _finish(
            conn,
            run,
            "stuck",
            error_json=json.dumps(
                {
                    "type": "CrashLoop",
                    "message": f"crash loop: {run.takeovers} takeovers since the last recorded step "
                    f"(max_takeovers {max_takeovers})",
                }
            ),
        )
        return
    definition = registry.get(run.name, run.version)
    run.owner = worker_id
    # The claim's rows (seqs up to CLAIM_PRELOAD_SEQS) go to the context's History, which reads
    # the rest in pages; the Run lets go of them so that replayed rows can be released.
    steps, run.steps = run.steps, None
    ctx = run.context = WorkflowContext(
        run, conn, steps, reconnect=lambda: db.connect(dsn, application_name=f"ilr-worker-{worker_id}")
    )
    try:
        result = definition.fn(ctx, run.input)
    except ContinuedAsNew:
        run.ended = "continued"  # its successor's insert committed with this run's end
        if hooks.on:
            hooks.workflow_ended(run, "continued")
        return
    except Suspend:
        return
    except Fenced:
        if ctx.suspended:
            suspend_swallowed(ctx._conn, run, worker_id)
        raise
    except BaseException as exc:  # noqa: BLE001
        if db.is_connection_fault(exc):
            raise  # a database that lost or refuses the connection is not the workflow's failure
        if ctx.suspended:
            suspend_swallowed(ctx._conn, run, worker_id)
            return
        if ctx.nondeterminism is not None:
            _finish(ctx._conn, run, "stuck", error_json=dumps_error(ctx.nondeterminism))
        elif ctx.history_limit_error is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            _end(ctx, run, "failed", error_json=_failed_error(ctx.history_limit_error))
        elif isinstance(exc, Cancelled):
            _end(ctx, run, "cancelled", error_json=dumps_error(exc))
        elif isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        else:
            _end(ctx, run, "failed", error_json=_failed_error(exc))
        return
    if ctx.suspended:
        suspend_swallowed(ctx._conn, run, worker_id)
    elif ctx.nondeterminism is not None:
        _finish(ctx._conn, run, "stuck", error_json=dumps_error(ctx.nondeterminism))
    elif ctx.history_limit_error is not None:  # the code caught it: the workflow fails all the same
        _end(ctx, run, "failed", error_json=_failed_error(ctx.history_limit_error))
    else:
        try:
            result_json = codec.dumps(result, "result")
        except InvalidInput as exc:
            _end(ctx, run, "failed", error_json=dumps_error(exc))
            return
        _end(ctx, run, "completed", result_json=result_json)


def _end(ctx, run: Run, status: str, **kw) -> None:
    """The workflow's end (completed, failed, cancelled), fenced; a workflow that started children
    applies their parent close policies in the same transaction (docs/protocol.md §5.6)."""
    _finish(ctx._conn, run, status, after=ctx._close_children(), **kw)


def _finish(conn, run: Run, status: str, **kw) -> None:
    """``store.finish``, then, once it committed, the end's telemetry (``run.ended`` = status)."""
    store.finish(conn, run, status, **kw)
    run.ended = status
    if hooks.on:
        hooks.workflow_ended(run, status)


def suspend_swallowed(conn, run: Run, worker_id: str) -> None:
    """Mark ``run`` stuck (SuspendSwallowed): its code caught the runtime's Suspend."""
    log.error("%s: workflow %s swallowed Suspend (a bare except?); marking it stuck", worker_id, run.workflow_id)
    store.mark_stuck_unfenced(
        conn,
        run,
        json.dumps(
            {
                "type": "SuspendSwallowed",
                "message": "Suspend swallowed: workflow code caught the runtime's "
                "Suspend (a bare except: or except BaseException:)",
            }
        ),
    )
