"""Helpers of the ported Tasks contract tests (tests/integration/test_tasks_contract.py and
tests/faults/test_tasks_conformance.py, whose docstring credits Django and django-tasks-db)."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync
from django.db import connections

from ilr._tasks.compat import TaskResultStatus, task_enqueued
from tests.support.queries.workflows import COUNT_WORKFLOWS_BY_NAME
from tests.support.waits import wait_for

TASK_MIN_PRIORITY, TASK_MAX_PRIORITY = -100, 100
TWO_QUEUES = {"default": {"BACKEND": "ilr.tasks.InterlockBackend", "QUEUES": ["default", "queue_1"]}}
"""A backend with a second queue, for the in-process tests (the workers serve "default")."""


def run(coroutine_function, *args, **kwargs):
    """Run an async test body from this (sync) test: asgiref's async_to_sync, so the backend's
    sync_to_async(thread_sensitive=True) comes back to this thread and its database connection."""
    return async_to_sync(coroutine_function)(*args, **kwargs)


def finished(result, timeout: float = 30.0):
    def done():
        result.refresh()
        return result.is_finished

    wait_for(done, timeout=timeout, message=f"task {result.id} to finish")
    return result


def logged(rt, task_id: str, prefix: str = "") -> list[str]:
    rows = rt.connection().execute(
        "select name from public.test_invocations where workflow_id = %s and name like %s order by id",
        (task_id, prefix + "%"),
    )
    return [r["name"] for r in rows.fetchall()]


def order_log(rt) -> list[str]:
    rows = rt.connection().execute("select name from public.test_invocations where name like 'order:%' order by id")
    return [r["name"].removeprefix("order:") for r in rows.fetchall()]


class enqueued_signals:
    """Captures task_enqueued as (sender, task_result) pairs (django-tasks-db's
    ``_capture_task_enqueued_signal``)."""

    def __enter__(self):
        self.received: list = []
        task_enqueued.connect(self._capture, dispatch_uid="conformance_enqueue", weak=False)
        return self.received

    def _capture(self, sender, task_result, **kwargs):
        self.received.append((sender, task_result))

    def __exit__(self, *exc):
        task_enqueued.disconnect(self._capture, dispatch_uid="conformance_enqueue")


def count_in_new_connection() -> int:
    """How many tasks another connection sees (django-tasks-db's
    ``get_task_count_in_new_connection``)."""
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute(COUNT_WORKFLOWS_BY_NAME)
            return cursor.fetchone()[0]
    finally:
        other.close()


def assert_ready(result, task, args, kwargs):
    assert uuid.UUID(result.id).version == 4
    assert result.status == TaskResultStatus.READY
    assert result.is_finished is False
    assert result.started_at is None and result.last_attempted_at is None and result.finished_at is None
    assert result.enqueued_at is not None
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018 - the property raises
    assert result.task == task
    assert result.args == args and result.kwargs == kwargs
    assert result.attempts == 0 and result.worker_ids == [] and result.errors == []


def assert_ran(result):
    assert result.is_finished is True
    assert result.started_at is not None and result.last_attempted_at is not None
    assert result.finished_at is not None
    assert result.enqueued_at <= result.started_at <= result.finished_at
