"""Interlock as a backend of Django's Tasks framework (``django.tasks``; on Django 5.2 the
django-tasks backport).

    TASKS = {"default": {"BACKEND": "ilr.tasks.InterlockBackend", "QUEUES": ["default", "emails"]}}

A task runs as a durable workflow named ``task:<queue>`` on ``manage.py ilr_worker`` (``--queue``
picks the queues a worker serves). ``enqueue`` inserts that workflow's row on the caller's Django
connection, inside the caller's transaction: a rollback discards the task and a commit makes it
claimable, so ``transaction.on_commit`` is not needed. A failed attempt is a recorded step and the
successful one the workflow's result; a worker that dies mid-attempt is taken over and the attempt
runs again (at least once, as any task queue); a task whose body must not repeat belongs in a
gated effect.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import numbers
import uuid
from typing import Any

from django.db import connections
from django.utils.module_loading import import_string

from ilr import _codec as codec
from ilr import _db as db
from ilr import _registry as registry
from ilr._queries.tasks import ENQUEUE_INSERT_WORKFLOWS
from ilr._retry import RetryPolicy
from ilr._tasks.compat import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from ilr._tasks.results import new_result
from ilr._tasks.values import to_json
from ilr._tasks.workflow import TASK_WORKFLOW_VERSION, run_task, workflow_name

__all__ = ["InterlockBackend", "InterlockTask", "register_task_queues"]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class InterlockTask(Task):
    """A ``Task`` with Interlock's options, given to ``@task(...)`` (Django passes them through).

    Attributes:
        max_attempts: attempts in all, the first included; 0 means unlimited. Default 1 (no retry,
            as Django's own backends).
        backoff: seconds before the second attempt (a number), or a RetryPolicy whose initial,
            backoff and max_interval shape the waits (its max_attempts is ignored). Default
            RetryPolicy(): 1 s, doubling, at most 100 s. Waits are durable timers, not sleeps.
        timeout: seconds an attempt may run, or None. Past it the attempt fails with
            TimeoutError; an ``async def`` task is cancelled, a plain function runs on in its
            thread and its result is dropped.

    Raises:
        InvalidTask: an option out of range, naming it.
    """

    max_attempts: int = 1
    backoff: float | RetryPolicy | None = None
    timeout: float | None = None

    def __post_init__(self):
        if not isinstance(self.max_attempts, int) or isinstance(self.max_attempts, bool) or self.max_attempts < 0:
            raise InvalidTask(f"max_attempts: must be a whole number >= 0 (0: unlimited), got {self.max_attempts!r}")
        if self.backoff is not None and not isinstance(self.backoff, RetryPolicy):
            if not codec.is_seconds(self.backoff):
                raise InvalidTask(
                    f"backoff: must be seconds (a number >= 0) or an ilr.RetryPolicy, got {self.backoff!r}"
                )
        if self.timeout is not None and not codec.is_seconds(self.timeout, positive=True):
            raise InvalidTask(f"timeout: must be a positive number of seconds or None, got {self.timeout!r}")
        # Django's own checks of these two compare before they check the type (a TypeError).
        if isinstance(self.priority, bool) or not isinstance(self.priority, numbers.Real):
            raise InvalidTask(f"priority: must be a whole number between -100 and 100, got {self.priority!r}")
        if self.run_after is not None and not isinstance(self.run_after, dt.datetime):
            raise InvalidTask(f"run_after: must be an aware datetime or None, got {self.run_after!r}")
        super(InterlockTask, self).__post_init__()


def _options(task: Task) -> dict[str, Any]:
    # A plain Task (made without @task on this backend) gets InterlockTask's defaults.
    backoff = getattr(task, "backoff", None)
    policy = backoff if isinstance(backoff, RetryPolicy) else RetryPolicy(initial=1.0 if backoff is None else backoff)
    return {
        "max_attempts": getattr(task, "max_attempts", 1),
        "backoff": {"initial": policy.initial, "backoff": policy.backoff, "max_interval": policy.max_interval},
        "timeout": getattr(task, "timeout", None),
    }


def _check_importable(task: Task) -> None:
    """Refuse a task a worker could not import by its path (one defined in a shell, in
    ``__main__``, or a Task not bound to its function's name): it would fail on every attempt."""
    path = task.module_path
    try:
        found = None if task.func.__module__ == "__main__" else import_string(path)
    except ImportError:
        found = None
    if getattr(found, "func", None) is not task.func:
        raise InvalidTask(
            f"task: {path!r} does not import as this task, and a worker imports it by that path: "
            "define it with @task at the top level of an importable module (not in a shell or __main__)"
        )


@functools.cache
def _code_sha256(name: str) -> str:
    # The task workflow's code hash, as a worker deploys it (the module's source, read once).
    return registry.get(name, TASK_WORKFLOW_VERSION).code_sha256


def register_task_queues(queues) -> list[str]:
    """Register the ``task:<queue>`` workflow of each queue name; returns the names."""
    names = []
    for queue in queues:
        name = workflow_name(queue)
        registry.workflow(name, TASK_WORKFLOW_VERSION)(run_task)
        names.append(name)
    return names


class InterlockBackend(BaseTaskBackend):
    """A ``django.tasks`` backend whose tasks are durable workflows on Interlock's workers.

    Settings (``TASKS[alias]``): ``QUEUES``, the queue names (default ["default"]; an empty list
    is refused: a worker serves queues it can name). ``OPTIONS``: {"DATABASE": the Django
    database alias of the ilr schema, default "default"}.
    """

    task_class = InterlockTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True
    registers_task_queues = True
    """ilr's AppConfig registers the task:<queue> workflows of every backend class with this set."""

    def __init__(self, alias: str, params: dict):
        super().__init__(alias, params)
        self.database = self.options.get("DATABASE", "default")
        register_task_queues(self.queues)

    def enqueue(self, task: Task, args, kwargs) -> TaskResult:
        """Insert the task's workflow row in the caller's transaction on ``OPTIONS["DATABASE"]``.

        Returns:
            a READY TaskResult whose id is the workflow id.

        Raises:
            InvalidTask: the task does not suit this backend (Django's rules), or its path does
                not import back as this task (a worker imports it by that path).
            InvalidInput: args or kwargs are not plain JSON, naming the path (``args[1]``); also
                a TypeError, as Django's own backends raise there.
        """
        self.validate_task(task)
        _check_importable(task)
        args, kwargs = to_json(list(args), "args"), to_json(dict(kwargs), "kwargs")
        options = _options(task)
        run_after = task.run_after
        input = {
            "task": task.module_path,
            "args": args,
            "kwargs": kwargs,
            "backend": self.alias,
            "queue_name": task.queue_name,
            "priority": task.priority,
            "run_after": run_after.isoformat() if run_after else None,
            **options,
        }
        input_json = codec.dumps(input, "task")
        name = workflow_name(task.queue_name)
        result_id = str(uuid.uuid4())
        with connections[self.database].cursor() as cursor:
            cursor.execute(
                ENQUEUE_INSERT_WORKFLOWS,
                {
                    "id": result_id,
                    "name": name,
                    "version": TASK_WORKFLOW_VERSION,
                    "code_sha256": _code_sha256(name),
                    "input": input_json,
                    "priority": task.priority,
                    "run_after": run_after,
                },
            )
            (enqueued_at,) = cursor.fetchone()
        result = new_result(task, result_id, input, status=TaskResultStatus.READY, workers=[], enqueued_at=enqueued_at)
        task_enqueued.send(type(self), task_result=result)
        return result

    def validate_task(self, task: Task) -> None:
        """Django's rules, with an unknown queue named with the queues there are."""
        if self.queues and task.queue_name not in self.queues:
            raise InvalidTask(
                f"Queue {task.queue_name!r} is not valid for backend. queue_name: not one of "
                f"TASKS[{self.alias!r}]['QUEUES'] ({', '.join(sorted(self.queues))})"
            )
        super().validate_task(task)

    def get_result(self, result_id: str) -> TaskResult:
        """The task's result now, read on ``OPTIONS["DATABASE"]`` (so a task enqueued in the
        caller's open transaction is visible to it).

        Raises:
            TaskResultDoesNotExist: no task of this backend has that id.
        """
        from ilr._tasks.results import read_result

        with connections[self.database].cursor() as cursor:
            result = read_result(cursor, str(result_id))
        if result is None or result.backend != self.alias:
            raise TaskResultDoesNotExist(result_id)
        return result

    def cancel(self, result_id: str, by: str | None = None) -> bool:
        """Cancel the task: one not started never runs; a running attempt is not interrupted, and
        no further attempt starts. Its result reads FAILED with an ``ilr.Cancelled`` error.

        Returns:
            True when this call requested the cancel, False when it was already requested or
                the task had finished.

        Raises:
            TaskResultDoesNotExist: no task of this backend has that id.
        """
        from ilr._ops.runtime import Runtime

        self.get_result(result_id)
        rt = Runtime(db.conninfo(self.database))
        try:
            return bool(rt.cancel(str(result_id), by=by))
        finally:
            rt.close()

    def check(self, **kwargs) -> list:
        from django.core import checks

        if not self.queues:
            return [
                checks.Error(
                    f"TASKS[{self.alias!r}]['QUEUES'] is empty: InterlockBackend needs its queue names listed",
                    hint="A worker serves the task:<queue> workflows of the queues it can name.",
                    id="ilr.E010",
                )
            ]
        return []
