"""Conformance of ``ilr.tasks.InterlockBackend`` to the contract tests of Django's Tasks framework
(issue 41): the tests of Django's own suite and of django-tasks-db that apply to a database
backend with a separate worker, ported to run here against this backend.

Credits. Ported from, and each test names its origin:

- Django, tests/tasks/test_tasks.py (``TaskTestCase``), tests/tasks/test_immediate_backend.py
  (``ImmediateBackendTestCase``) and tests/tasks/tasks.py. Copyright (c) Django Software
  Foundation and individual contributors. BSD 3-Clause License.
- django-tasks-db (github.com/RealOrangeOne/django-tasks-db), tests/tests.py
  (``DatabaseBackendTestCase``, ``DatabaseBackendWorkerTestCase``, ``DatabaseTaskResultTestCase``,
  ``DatabaseWorkerProcessTestCase``) and tests/tasks.py. Copyright (c) Jake Howard and individual
  contributors. BSD 3-Clause License.

Both licenses ask that the copyright notice, their conditions and their disclaimer stay with
redistributed source: "Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met: 1. Redistributions of
source code must retain the above copyright notice, this list of conditions and the following
disclaimer. 2. Redistributions in binary form must reproduce the above copyright notice, this list
of conditions and the following disclaimer in the documentation and/or other materials provided
with the distribution. 3. Neither the name of the copyright holder nor the names of its
contributors may be used to endorse or promote products derived from this software without
specific prior written permission. THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND
CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO
EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF
SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING
NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF
THE POSSIBILITY OF SUCH DAMAGE."

How they are adapted. Django's tests run on the Dummy or Immediate backend and django-tasks-db's
on its DatabaseBackend with ``call_command("db_worker", batch=True)``; here the backend is
InterlockBackend (TASKS in interlock_project/settings.py) and a task runs on real
``manage.py ilr_worker`` subprocesses (the ``workers`` fixture), waited on by condition
(tests/support/waits.py), never by sleeps. Tests that need no worker are in
tests/integration/test_tasks_contract.py, in-process on the emptied test database (``rt``).
Exceptions and the logger name come through ilr/_tasks/compat.py, so the modules run on
Django 6 (django.tasks) and on Django 5.2 (the django-tasks backport) alike.
Not ported, as not the contract of a database backend: assertions on query counts, on
DBTaskResult's model, index, admin and pruning, db_worker's options (--interval, --max-tasks,
--worker-id, --exclude-queues, --batch), the Dummy and Immediate backends' own behaviour (results
kept in memory, run at enqueue), and Django's handler tests (no TASKS, a missing backend module).
The queue a worker serves (test_doesnt_process_different_queue) is tests/faults/test_tasks.py's
test_a_worker_serves_only_its_queues. Django main's TaskResult ordering, equality and hash tests
are not in Django 6.1.3 nor in the backport, so there is no contract of either to run them on.

Deliberate differences, each also noted at its test:
- A task whose path no longer imports as a Task fails on the worker, and ``get_result`` of it
  raises ValueError naming the path (django-tasks-db reads a FAILED row whose ``.task`` raises).
- A worker SIGKILLed mid-task: django-tasks-db leaves the task RUNNING (its issue 46); here the
  lease runs out and another worker takes it over (tests/faults/test_tasks.py covers it).
- Empty ``QUEUES`` (which Django reads as "any queue") is refused by this backend's check
  ilr.E010: a worker serves the queues it can name.
"""

from __future__ import annotations

import datetime as dt
import signal

import pytest
from django.db import connections
from django.utils import timezone

from ilr._tasks.compat import (
    TaskResultStatus,
    default_task_backend,
)
from tests.support import conformance_tasks as test_tasks
from tests.support.queries.steps import OUTPUT_OF_STEPS_BY_WORKFLOW_ID_NAME_ATTEMPT
from tests.support.queries.workflows import (
    COUNT_WORKFLOWS_BY_STATUS_COMPLETED,
    LOCK_WORKFLOWS_BY_ID,
    SET_WORKFLOWS_AVAILABLE_AT_BY_ID,
    SET_WORKFLOWS_INPUT_BY_ID,
)
from tests.support.task_checks import (
    assert_ran,
    finished,
    logged,
    order_log,
    run,
)
from tests.support.waits import wait_for


def test_args_and_kwargs_are_normalized_to_json(rt, workers):
    """Django's TaskResult normalizes args and kwargs to JSON (base.py ``__post_init__``, with
    ``normalize_json``): tuples become lists, bytes text. The task receives them so on a worker."""
    result = test_tasks.echo.enqueue((1, 2), b"bytes", key=("a", {"b": (3,)}))
    assert result.args == [[1, 2], "bytes"]
    assert result.kwargs == {"key": ["a", {"b": [3]}]}
    workers.start("w1")
    assert finished(result).return_value == {"args": [[1, 2], "bytes"], "kwargs": {"key": ["a", {"b": [3]}]}}
    assert test_tasks.echo.get_result(result.id).args == [[1, 2], "bytes"]


# -- on workers: running, results, errors --------------------------------------------------------


def test_run_enqueued_task(rt, workers):
    """Django test_immediate_backend.py: test_enqueue_task, test_enqueue_task_async, test_result,
    test_result_async; django-tasks-db tests.py: test_run_enqueued_task, test_run_subprocess,
    test_refresh_result, test_refresh_result_async (the result object is not changed by the run
    until refreshed; then SUCCESSFUL with its timestamps in order, one attempt, the return value)."""
    results = [
        test_tasks.noop_task.enqueue(1, two=3),
        test_tasks.noop_task_async.enqueue(),
        default_task_backend.enqueue(test_tasks.calculate_meaning_of_life, [], {}),
    ]
    later = run(default_task_backend.aenqueue, test_tasks.calculate_meaning_of_life, (), {})
    workers.start("w1")
    wait_for(
        lambda: rt.connection().execute(COUNT_WORKFLOWS_BY_STATUS_COMPLETED).fetchone()["n"] == 4,
        message="four tasks to complete",
    )
    for result in (*results, later):
        assert result.status == TaskResultStatus.READY and result.attempts == 0  # not refreshed yet
    for result in results:
        finished(result)
    run(later.arefresh)
    for result in (*results, later):
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert_ran(result)
        assert result.attempts == 1 and result.worker_ids == ["w1"] and result.errors == []
    assert results[0].return_value is None and results[1].return_value is None
    assert results[0].args == [1] and results[0].kwargs == {"two": 3}
    assert results[2].return_value == 42 and later.return_value == 42


def test_status_moves_ready_running_successful_and_the_signals_say_so(rt, workers, tmp_path):
    """The READY -> RUNNING -> SUCCESSFUL transitions and the task_started / task_finished signals,
    sent on the worker by the backend's class (django-tasks-db tests.py test_interrupt_signals and
    test_repeat_ctrl_c read RUNNING with the worker's id while the task runs; Django's signals
    module logs from these signals)."""
    gate = tmp_path / "gate"
    result = test_tasks.wait_for_file.enqueue(str(gate))
    assert result.status == TaskResultStatus.READY
    workers.start("w1")

    def running():
        result.refresh()
        return result.status == TaskResultStatus.RUNNING

    wait_for(running, message="the task to be RUNNING")
    assert result.worker_ids == ["w1"] and result.attempts == 1
    assert result.started_at is not None and result.finished_at is None and not result.is_finished
    wait_for(lambda: logged(rt, result.id, "wait_for_file"), message="the body to start")
    gate.touch()
    assert finished(result).status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == "done"
    assert logged(rt, result.id, "signal:") == [
        "signal:started:RUNNING:InterlockBackend",
        "signal:finished:SUCCESSFUL:InterlockBackend",
    ]


def test_failing_task(rt, workers):
    """Django test_immediate_backend.py: test_catches_exception (ValueError and SystemExit);
    django-tasks-db tests.py: test_failing_task, test_system_exit_task, test_worker_doesnt_exit
    (``exit(1)`` in a task fails the task, not the worker); and the task_finished signal with
    FAILED."""
    cases = [
        (test_tasks.failing_task_value_error, ValueError, "This task failed due to ValueError"),
        (test_tasks.failing_task_system_exit, SystemExit, "This task failed due to SystemExit"),
        (test_tasks.exit_task, SystemExit, "1"),
    ]
    results = [t.enqueue() for t, _, _ in cases]
    w1 = workers.start("w1")
    for result, (t, exception, message) in zip(results, cases, strict=True):
        finished(result)
        assert result.status == TaskResultStatus.FAILED
        with pytest.raises(ValueError, match="Task failed"):
            result.return_value  # noqa: B018 - the property raises
        assert_ran(result)
        assert result.errors[0].exception_class is exception
        assert result.errors[0].exception_class_path == f"builtins.{exception.__name__}"
        assert result.errors[0].traceback.endswith(f"{exception.__name__}: {message}\n"), result.errors[0].traceback
        assert result.task == t and result.args == [] and result.kwargs == {}
        assert logged(rt, result.id, "signal:finished:") == ["signal:finished:FAILED:InterlockBackend"]
    assert w1.poll() is None  # the worker runs on


def test_keyboard_interrupt_task(rt, workers):
    """django-tasks-db tests.py: test_keyboard_interrupt_task: a task that raises KeyboardInterrupt
    fails with it, and the worker runs on. (Django's ImmediateBackend lets it propagate,
    test_throws_keyboard_interrupt: there the caller's own thread runs the task.)"""
    result = test_tasks.failing_task_keyboard_interrupt.enqueue()
    after = test_tasks.calculate_meaning_of_life.enqueue()
    w1 = workers.start("w1", concurrency=1)
    assert finished(result).status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is KeyboardInterrupt
    assert "This task failed due to KeyboardInterrupt" in result.errors[0].traceback
    assert finished(after).return_value == 42
    assert w1.poll() is None


def test_complex_exception_and_return_value(rt, workers):
    """Django test_immediate_backend.py: test_complex_exception, test_complex_return_value;
    django-tasks-db tests.py: test_complex_exception, test_complex_return_value (a return value
    that is not JSON fails the task with TypeError)."""
    exc_result = test_tasks.complex_exception.enqueue()
    ret_result = test_tasks.complex_return_value.enqueue()
    workers.start("w1")
    finished(exc_result)
    assert exc_result.status == TaskResultStatus.FAILED
    assert_ran(exc_result)
    assert exc_result._return_value is None
    assert exc_result.errors[0].exception_class is ValueError
    assert 'ValueError(ValueError("This task failed"))' in exc_result.errors[0].traceback
    finished(ret_result)
    assert ret_result.status == TaskResultStatus.FAILED
    assert_ran(ret_result)
    assert ret_result._return_value is None
    assert ret_result.errors[0].exception_class is TypeError
    assert "Unsupported type" in ret_result.errors[0].traceback


def test_task_error_of_an_invalid_exception_path(rt, workers):
    """Django test_tasks.py: test_task_error_invalid_exception, test_task_error_unknown_module
    (on a result read from this backend)."""
    workers.start("w1")
    result = finished(test_tasks.failing_task_value_error.enqueue())
    assert len(result.errors) == 1
    object.__setattr__(result.errors[0], "exception_class_path", "subprocess.run")
    with pytest.raises(ValueError, match="'subprocess.run' does not reference a valid exception."):
        result.errors[0].exception_class  # noqa: B018 - the property raises
    object.__setattr__(result.errors[0], "exception_class_path", "does.not.exist")
    with pytest.raises(ImportError):
        result.errors[0].exception_class  # noqa: B018 - the property raises


def test_takes_context(rt, workers):
    """Django test_immediate_backend.py and django-tasks-db tests.py: test_takes_context,
    test_context (the context's task_result is this task's; its attempt is 1)."""
    id_result = test_tasks.get_task_id.enqueue()
    context_result = test_tasks.test_context.enqueue(1)
    workers.start("w1")
    assert finished(id_result).return_value == id_result.id
    assert finished(context_result).status == TaskResultStatus.SUCCESSFUL, context_result.errors


def test_batch_processes_all_tasks(rt, workers):
    """django-tasks-db tests.py: test_batch_processes_all_tasks, and DatabaseWorkerProcessTestCase
    test_multiple_workers (ten tasks on three workers: each runs once, all succeed)."""
    results = [test_tasks.ordered.enqueue(f"t{i}") for i in range(10)]
    failing = test_tasks.failing_task_value_error.enqueue()
    for worker_id in ("w1", "w2", "w3"):
        workers.start(worker_id)
    for result in results:
        assert finished(result).status == TaskResultStatus.SUCCESSFUL
        assert len(result.worker_ids) == 1 and result.worker_ids[0] in {"w1", "w2", "w3"}
    assert finished(failing).status == TaskResultStatus.FAILED
    assert sorted(order_log(rt)) == sorted(f"t{i}" for i in range(10))  # each ran once


# -- on workers: priority, run_after, locks, a path that is no task ----------------------------


def test_run_after(rt, workers):
    """django-tasks-db tests.py: test_run_after: a task deferred to the future is not run (it stays
    READY while a task enqueued after it runs); once due, it runs."""
    deferred = test_tasks.ordered.using(run_after=timezone.now() + dt.timedelta(hours=10)).enqueue("deferred")
    assert deferred.task.run_after is not None
    now = test_tasks.ordered.enqueue("now")
    workers.start("w1")
    finished(now)
    deferred.refresh()
    assert deferred.status == TaskResultStatus.READY and deferred.attempts == 0
    assert test_tasks.ordered.get_result(deferred.id).task.run_after == deferred.task.run_after
    # django-tasks-db moves run_after to now in its table; here the workflow row's available_at.
    rt.connection().execute(SET_WORKFLOWS_AVAILABLE_AT_BY_ID, (deferred.id,))
    assert finished(deferred).status == TaskResultStatus.SUCCESSFUL
    assert order_log(rt) == ["now", "deferred"]


def test_run_after_priority(rt, workers):
    """django-tasks-db tests.py: test_run_after_priority, and DBTaskResultOrderingTestCase (higher
    priority first; then the earlier run_after; then the earlier enqueued): the order one worker
    of concurrency 1 runs the due tasks in, and the future ones not at all."""
    now = timezone.now()
    enq = test_tasks.ordered.using
    enq(priority=20, run_after=now - dt.timedelta(hours=2)).enqueue("old")
    enq(priority=20, run_after=now - dt.timedelta(hours=10)).enqueue("very_old")
    far_future = enq(run_after=now + dt.timedelta(hours=10)).enqueue("far_future")
    high_far_future = enq(priority=10, run_after=now + dt.timedelta(hours=10)).enqueue("high_far_future")
    future = enq(run_after=now + dt.timedelta(hours=2)).enqueue("future")
    enq(priority=10).enqueue("high")
    enq(priority=2).enqueue("low")
    enq(priority=-2).enqueue("lower")
    test_tasks.ordered.enqueue("normal_first")
    test_tasks.ordered.enqueue("normal_second")
    workers.start("w1", concurrency=1)
    expected = ["very_old", "old", "high", "low", "normal_first", "normal_second", "lower"]
    wait_for(lambda: len(order_log(rt)) == len(expected), message="the due tasks to run")
    assert order_log(rt) == expected
    for result in (far_future, high_far_future, future):
        result.refresh()
        assert result.status == TaskResultStatus.READY


def test_worker_with_locked_rows(rt, workers):
    """django-tasks-db tests.py: test_worker_with_locked_rows: a task whose row another
    transaction holds locked does not stop a worker from running the others."""
    locked = test_tasks.noop_task.enqueue()
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("begin")
            cursor.execute(LOCK_WORKFLOWS_BY_ID, [locked.id])
            assert len(cursor.fetchall()) == 1
        free = test_tasks.noop_task.enqueue()
        workers.start("w1")
        assert finished(free).status == TaskResultStatus.SUCCESSFUL
        locked.refresh()
        assert locked.status == TaskResultStatus.READY
    finally:
        other.close()
    assert finished(locked).status == TaskResultStatus.SUCCESSFUL


def test_invalid_task_path(rt, workers):
    """django-tasks-db tests.py: test_invalid_task_path, test_missing_task_path,
    test_task_import_string (both DatabaseBackendTestCase and the worker's): a stored task whose
    path is not a Task fails on the worker without running anything. Deliberate difference:
    ``get_result`` of it raises ValueError naming the path (as Django's Task._reconstruct does),
    where django-tasks-db reads a FAILED row whose ``.task`` raises."""
    ids = {}
    for path in ("subprocess.check_output", "missing.func", "tests.support.conformance_tasks.some_test"):
        result = test_tasks.noop_task.enqueue(["exit", "1"])
        # Point the stored task at `path`, as the origin creates its DBTaskResult rows.
        rt.connection().execute(
            SET_WORKFLOWS_INPUT_BY_ID,
            (path, result.id),
        )
        ids[path] = result.id
    workers.start("w1")
    for path, task_id in ids.items():
        wait_for(lambda tid=task_id: rt.describe(tid)["status"] == "failed", message=f"{path} to fail")
        with pytest.raises(ValueError, match=f"Expected '{path}' to point to a Task instance."):
            default_task_backend.get_result(task_id)
        attempt = rt.connection().execute(OUTPUT_OF_STEPS_BY_WORKFLOW_ID_NAME_ATTEMPT, (task_id,)).fetchone()["output"]
        assert attempt["ok"] is False
        assert attempt["error"]["exception_class_path"] == "builtins.ValueError"


def test_interrupt_signals(rt, workers, tmp_path):
    """django-tasks-db tests.py DatabaseWorkerProcessTestCase: test_interrupt_signals,
    test_interrupt_no_tasks (SIGINT or SIGTERM while a task runs: the worker finishes it, then
    exits 0; with nothing to do it exits 0 at once)."""
    idle = workers.start("idle")
    wait_for(lambda: "ilr_worker idle: running" in workers.log("idle"), message="the idle worker to start")
    idle.send_signal(signal.SIGTERM)
    assert idle.wait(30) == 0
    for sig in (signal.SIGINT, signal.SIGTERM):
        gate = tmp_path / f"gate-{sig.name}"
        result = test_tasks.wait_for_file.enqueue(str(gate))
        worker = workers.start(f"w-{sig.name}")
        wait_for(lambda r=result: logged(rt, r.id, "wait_for_file"), message="the task to start")
        result.refresh()
        assert result.status == TaskResultStatus.RUNNING
        assert result.worker_ids == [f"w-{sig.name}"]
        worker.send_signal(sig)
        gate.touch()
        assert worker.wait(30) == 0
        assert finished(result).status == TaskResultStatus.SUCCESSFUL
