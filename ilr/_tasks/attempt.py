"""One attempt of a Django task on a worker: the call, its timeout, its outcome as plain JSON.

An ``async def`` task runs on the worker's event loop (one per worker process, on a thread of its
own, started at the first async task), so async tasks of one worker share it as in an ASGI server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import threading
from inspect import iscoroutinefunction
from typing import Any

from django.db import close_old_connections

from ilr._errors import InvalidInput
from ilr._tasks.results import new_result, task_of
from ilr._tasks.values import to_json
from ilr._worker.run import traceback_text

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def event_loop() -> asyncio.AbstractEventLoop:
    """This process's event loop for async tasks, running on a daemon thread (started once)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="ilr-tasks-loop", daemon=True).start()
            _loop = loop
        return _loop


def _call(func, args: list, kwargs: dict, timeout: float | None) -> Any:
    """Call ``func``: a coroutine function on the event loop, a plain one here.

    Raises:
        TimeoutError: past ``timeout`` seconds. A coroutine is cancelled then; a plain function
            cannot be stopped in Python, so it runs on in its own thread and its result is dropped
            (as a Temporal activity past its start-to-close timeout).
    """
    if iscoroutinefunction(func):
        future = asyncio.run_coroutine_threadsafe(func(*args, **kwargs), event_loop())
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"the task exceeded its timeout of {timeout:g} s and was cancelled") from None
    if timeout is None:
        return func(*args, **kwargs)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = func(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed back to the attempt below
            box["error"] = exc
        finally:
            close_old_connections()

    thread = threading.Thread(target=target, name="ilr-task-timeout", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"the task exceeded its timeout of {timeout:g} s (it runs on; its result is dropped)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _error(exc: BaseException) -> dict[str, str]:
    """A task's exception as Django's TaskError fields: its class path and traceback."""
    kind = type(exc)
    return {
        "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
        "traceback": traceback_text(exc),
    }


def run_attempt(
    workflow_id: str, input: dict, attempt: int, workers: list[str], worker_id: str | None, last: bool
) -> dict[str, Any]:
    """Run attempt ``attempt`` of the task; never raises for the task's own failure.

    Returns:
        {"ok": True, "value", "worker", "started_at", "finished_at"} or {"ok": False, "error":
        {"exception_class_path", "traceback"}, ...}.
    """
    from ilr._tasks.compat import TaskContext, TaskResultStatus, task_finished, task_started

    started = dt.datetime.now(dt.UTC)
    worker = worker_id or "?"
    outcome: dict[str, Any] = {"worker": worker, "attempt": attempt, "started_at": started.isoformat()}
    close_old_connections()
    task = result = None
    try:
        task = task_of(input)
        result = new_result(
            task,
            workflow_id,
            input,
            status=TaskResultStatus.RUNNING,
            workers=[*workers, worker],
            started_at=started,
            last_attempted_at=started,
        )
        task_started.send(sender=type(task.get_backend()), task_result=result)
        args = list(input.get("args", []))
        if task.takes_context:
            args.insert(0, TaskContext(task_result=result))
        value = _call(task.func, args, dict(input.get("kwargs", {})), input.get("timeout"))
        try:
            value = to_json(value, "return value")
        except InvalidInput as exc:
            raise TypeError(f"{exc} ({task.module_path} returned it)") from None
        outcome.update(ok=True, value=value)
    except KeyboardInterrupt as exc:
        # On a worker's run thread a KeyboardInterrupt is the task's own raise (a signal reaches
        # only the main thread, whose handler stops the worker gracefully): it is the attempt's
        # failure, as django-tasks-db records it. On the main thread it may be a real Ctrl-C.
        if threading.current_thread() is threading.main_thread():
            raise
        outcome.update(ok=False, error=_error(exc))
    except BaseException as exc:  # noqa: BLE001 - the task's failure is its outcome
        outcome.update(ok=False, error=_error(exc))
    finally:
        close_old_connections()
    outcome["finished_at"] = dt.datetime.now(dt.UTC).isoformat()
    if result is not None and task is not None and (outcome["ok"] or last):
        status = TaskResultStatus.SUCCESSFUL if outcome["ok"] else TaskResultStatus.FAILED
        object.__setattr__(result, "status", status)
        task_finished.send(sender=type(task.get_backend()), task_result=result)
    return outcome
