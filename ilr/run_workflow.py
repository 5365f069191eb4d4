"""Run one claimed workflow's code and record how it ended (docs/protocol.md §3.2, §3.4)."""

from __future__ import annotations

import json
import logging

from ilr import codec, db, registry, store
from ilr.claims import Run
from ilr.context import WorkflowContext, dumps_error
from ilr.errors import Cancelled, Fenced, InvalidInput, Suspend

log = logging.getLogger("ilr.worker")


def run_workflow(conn: db.Connection, run: Run, *, worker_id: str, dsn: str, max_takeovers: int) -> None:
    """Run the claimed workflow ``run`` on ``conn`` and record how it ended: CrashLoop (stuck)
    past ``max_takeovers``, completed with its result, failed, cancelled, stuck on
    NonDeterminism or a swallowed Suspend; nothing when it suspended.

    Raises:
        Fenced: the run lost its claim. A connection fault: the database, not the workflow,
            failed (the worker abandons the run).
    """
    if run.takeovers > max_takeovers:
        store.finish(
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
    steps = (
        run.steps
        if run.steps is not None
        else {
            row["seq"]: row
            for row in conn.execute(
                "select seq, name, kind, fingerprint, output, error from ilr.steps where workflow_id = %s order by seq",
                (run.workflow_id,),
            ).fetchall()
        }
    )
    ctx = run.context = WorkflowContext(
        run, conn, steps, reconnect=lambda: db.connect(dsn, application_name=f"ilr-worker-{worker_id}")
    )
    try:
        result = definition.fn(ctx, run.input)
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
            store.finish(ctx._conn, run, "stuck", error_json=dumps_error(ctx.nondeterminism))
        elif isinstance(exc, Cancelled):
            store.finish(ctx._conn, run, "cancelled", error_json=dumps_error(exc))
        elif isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        else:
            store.finish(ctx._conn, run, "failed", error_json=dumps_error(exc))
        return
    if ctx.suspended:
        suspend_swallowed(ctx._conn, run, worker_id)
    elif ctx.nondeterminism is not None:
        store.finish(ctx._conn, run, "stuck", error_json=dumps_error(ctx.nondeterminism))
    else:
        try:
            result_json = codec.dumps(result, "result")
        except InvalidInput as exc:
            store.finish(ctx._conn, run, "failed", error_json=dumps_error(exc))
            return
        store.finish(ctx._conn, run, "completed", result_json=result_json)


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
