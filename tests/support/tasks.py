"""Django tasks used by the tests of ``ilr.tasks`` (TASKS in interlock_project/settings.py names
``ilr.tasks.InterlockBackend``). Each logs its executions to public.test_invocations under its
task id, as the test workflows do (tests/support/flows.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from ilr.tasks import InterlockTask
from tests.support.flows import invoke

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task  # type: ignore[no-redef]


@task(takes_context=True)
def add(context, a: int, b: int) -> int:
    invoke(context.task_result.id, "add")
    return a + b


@task(takes_context=True, max_attempts=3, backoff=0.05)
def flaky(context, fail_times: int) -> dict:
    """Raises on its first ``fail_times`` attempts; returns the attempt that succeeded."""
    n = invoke(context.task_result.id, "flaky")
    if n <= fail_times:
        raise ConnectionError(f"attempt {n} fails on purpose")
    return {"attempt": context.attempt, "workers": context.task_result.worker_ids}


@task(takes_context=True)
def always_fails(context) -> None:
    invoke(context.task_result.id, "always_fails")
    raise ValueError("this task always fails")


@task(takes_context=True)
async def async_where(context) -> dict:
    """An async task: says which thread and event loop ran it."""
    await asyncio.sleep(0)
    return {"thread": threading.current_thread().name, "loop": id(asyncio.get_running_loop())}


@task(timeout=0.5)
async def async_too_long() -> None:
    await asyncio.sleep(30)


@task(takes_context=True)
def log_order(context, label: str) -> str:
    invoke(context.task_result.id, f"order:{label}")
    return label


@task(takes_context=True)
def blocks_until(context, path: str) -> str:
    """Logs its start, then waits (up to 60 s) for ``path`` to exist: a task a test can kill mid-body."""
    invoke(context.task_result.id, "blocks_until")
    deadline = time.monotonic() + 60
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return "done"


@task()
def returns_a_set() -> set:
    return {1, 2}


def unbound_body() -> int:
    """A module-level function that ``task()(unbound_body)`` wraps without binding the Task to a
    name: its path imports this function, not a Task, so a worker could never run it."""
    return 1


assert isinstance(add, InterlockTask)
