"""Task functions of the conformance tests (tests/faults/test_tasks_conformance.py), after those of
Django's tests/tasks/tasks.py and django-tasks-db's tests/tasks.py (both BSD-3-Clause: Copyright
(c) Django Software Foundation and individual contributors; Copyright (c) Jake Howard and
individual contributors). Names are kept where they match, so a ported test reads as its origin.

Beside them, receivers of ``task_started`` and ``task_finished``: those signals are sent on the
worker, so for a task of this module each logs ``signal:<started|finished>:<status>:<sender>``
to public.test_invocations under the task id, where the test process can read it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ilr._tasks.compat import TaskContext, task, task_finished, task_started
from tests.support.flows import invoke


@task()
def noop_task(*args: Any, **kwargs: Any) -> None:
    return None


@task
def noop_task_from_bare_decorator(*args: Any, **kwargs: Any) -> None:
    return None


@task()
async def noop_task_async(*args: Any, **kwargs: Any) -> None:
    return None


@task()
def calculate_meaning_of_life() -> int:
    return 42


@task()
def failing_task_value_error() -> None:
    raise ValueError("This task failed due to ValueError")


@task()
def failing_task_system_exit() -> None:
    raise SystemExit("This task failed due to SystemExit")


@task()
def failing_task_keyboard_interrupt() -> None:
    raise KeyboardInterrupt("This task failed due to KeyboardInterrupt")


@task()
def complex_exception() -> None:
    raise ValueError(ValueError("This task failed"))


@task()
def complex_return_value() -> Any:
    # Return something which isn't JSON serializable nor picklable
    return lambda: True


@task()
def exit_task() -> None:
    exit(1)


@task(takes_context=True)
def get_task_id(context: TaskContext) -> str:
    return context.task_result.id


@task(takes_context=True)
def test_context(context: TaskContext, attempt: int) -> None:
    assert isinstance(context, TaskContext)
    assert context.attempt == attempt


@task(takes_context=True)
def echo(context: TaskContext, *args: Any, **kwargs: Any) -> dict:
    """Returns what it was given (after the JSON round trip), and logs its run."""
    invoke(context.task_result.id, "echo")
    return {"args": list(args), "kwargs": kwargs}


@task(takes_context=True)
def ordered(context: TaskContext, label: str) -> str:
    """Logs ``order:<label>`` when it runs: the run order of several tasks."""
    invoke(context.task_result.id, f"order:{label}")
    return label


@task(takes_context=True)
def wait_for_file(context: TaskContext, path: str) -> str:
    """Logs its start, then waits (up to 60 s) for ``path`` to exist: a task a test can watch
    while it is RUNNING (in place of the origin's sleep_for and hang)."""
    invoke(context.task_result.id, "wait_for_file")
    deadline = time.monotonic() + 60
    while not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return "done"


def _log_signal(kind: str, sender, task_result, **kwargs) -> None:
    if task_result.task.module_path.startswith(f"{__name__}."):
        invoke(task_result.id, f"signal:{kind}:{task_result.status}:{sender.__name__}")


def _started(sender, task_result, **kwargs) -> None:
    _log_signal("started", sender, task_result)


def _finished(sender, task_result, **kwargs) -> None:
    _log_signal("finished", sender, task_result)


task_started.connect(_started, dispatch_uid="ilr-conformance-started", weak=False)
task_finished.connect(_finished, dispatch_uid="ilr-conformance-finished", weak=False)
