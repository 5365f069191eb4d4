"""A task's ``TaskResult``, read from its workflow row and its recorded attempts."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from typing import Any

from django.utils.module_loading import import_string

from ilr._queries.tasks import GET_RESULT_SELECT_STEPS, GET_RESULT_SELECT_WORKFLOWS

STATUS_OF = {
    "pending": "READY",
    "sleeping": "READY",  # between attempts: ready to be executed again
    "running": "RUNNING",
    "completed": "SUCCESSFUL",
    "failed": "FAILED",
    "cancelled": "FAILED",
    "stuck": "FAILED",
    "terminated": "FAILED",
}
"""Django's TaskResultStatus of each workflow status a task can have."""

_ERROR_CLASS = {"Cancelled": "ilr.Cancelled"}
"""The exception class path of a workflow error with no failed attempt behind it; any other
(a crash loop, a lost deployment) reads as ilr.WorkflowFailed."""


def task_of(input: dict):
    """The ``Task`` of a task workflow's input, with the options it was enqueued with.

    Raises:
        ValueError: the path no longer imports as a Task.
    """
    try:
        task = import_string(input["task"])
        changes: dict[str, Any] = {"queue_name": input.get("queue_name", task.queue_name)}
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"Expected {input['task']!r} to point to a Task instance.") from exc
    if input.get("priority") is not None:
        changes["priority"] = input["priority"]
    if input.get("run_after"):
        changes["run_after"] = dt.datetime.fromisoformat(input["run_after"])
    return dataclasses.replace(task, **changes)


def new_result(
    task,
    result_id: str,
    input: dict,
    *,
    status,
    workers: list[str],
    enqueued_at: dt.datetime | None = None,
    started_at: dt.datetime | None = None,
    finished_at: dt.datetime | None = None,
    last_attempted_at: dt.datetime | None = None,
    errors: list | None = None,
):
    """A ``TaskResult`` of ``task`` with the arguments and backend of its workflow ``input``."""
    from ilr._tasks.compat import TaskResult

    return TaskResult(
        task=task,
        id=result_id,
        status=status,
        enqueued_at=enqueued_at,
        started_at=started_at,
        finished_at=finished_at,
        last_attempted_at=last_attempted_at,
        args=input.get("args", []),
        kwargs=input.get("kwargs", {}),
        backend=input.get("backend", "default"),
        errors=errors or [],
        worker_ids=workers,
    )


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _when(text: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(text) if text else None


def read_result(cursor, result_id: str):
    """The TaskResult of task ``result_id``, read on ``cursor`` (a Django or psycopg cursor whose
    rows are tuples), or None when no task has that id.

    Raises:
        ValueError: the task's function no longer imports as a Task (as Django's own backends).
    """
    from ilr._tasks.compat import TaskError, TaskResultStatus

    cursor.execute(GET_RESULT_SELECT_WORKFLOWS, (result_id,))
    row = cursor.fetchone()
    if row is None:
        return None
    wf_id, _name, input, status, priority, result, error, owner, created_at, updated_at, first_claim, last_claim = row
    input = _json(input)
    cursor.execute(GET_RESULT_SELECT_STEPS, (wf_id,))
    # The failed attempts are steps; the successful one is the workflow's result (_tasks.workflow).
    attempts = [_json(output) for (output,) in cursor.fetchall()]
    result = _json(result)
    if status == "completed":
        attempts.append(result)
    workers = [a["worker"] for a in attempts]
    if status == "running" and owner:
        workers.append(owner)  # the attempt under way
    errors = [TaskError(**a["error"]) for a in attempts if not a["ok"]]
    error = _json(error)
    if status in ("cancelled", "stuck", "terminated") or (status == "failed" and not errors):
        errors.append(
            TaskError(
                exception_class_path=_ERROR_CLASS.get(str((error or {}).get("type")), "ilr.WorkflowFailed"),
                traceback=(error or {}).get("traceback") or json.dumps(error),
            )
        )
    finished = status in ("completed", "failed", "cancelled", "stuck", "terminated")
    task_result = new_result(
        task_of(input),
        wf_id,
        input,
        status=TaskResultStatus[STATUS_OF[status]],
        workers=workers,
        enqueued_at=created_at,
        started_at=first_claim,
        finished_at=updated_at if finished else None,
        last_attempted_at=_when(attempts[-1]["started_at"]) if attempts and status != "running" else last_claim,
        errors=errors,
    )
    if status == "completed":
        object.__setattr__(task_result, "_return_value", result["value"])
    return task_result
