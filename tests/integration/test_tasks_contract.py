"""Conformance of ``ilr.tasks.InterlockBackend`` to the contract tests of Django's Tasks framework
(issue 41), the half that needs no worker: the backend, Task, enqueue and get_result, in-process on
the emptied test database. Ported from Django's tests/tasks/ (Copyright (c) Django Software
Foundation and individual contributors) and django-tasks-db's tests/tests.py (Copyright (c) Jake
Howard and individual contributors), both under the BSD 3-Clause License, whose conditions and
disclaimer are quoted in full in tests/faults/test_tasks_conformance.py, the half on workers. Each
test names its origin; how they are adapted and the deliberate differences are listed there.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import pickle
import uuid

import pytest
from django.db import transaction
from django.test import override_settings
from django.utils import timezone
from django.utils.module_loading import import_string

from ilr._tasks.compat import (
    LOGGER_NAME,
    InvalidTask,
    InvalidTaskBackend,
    Task,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    default_task_backend,
    task,
    task_backends,
)
from ilr.tasks import InterlockBackend, InterlockTask
from tests.support import conformance_tasks as test_tasks
from tests.support.task_checks import (
    TASK_MAX_PRIORITY,
    TASK_MIN_PRIORITY,
    TWO_QUEUES,
    assert_ready,
    count_in_new_connection,
    enqueued_signals,
    run,
)

# -- in-process: the backend, Task and enqueue ---------------------------------------------------


def test_using_correct_backend(rt):
    """Django test_immediate_backend.py / django-tasks-db tests.py: test_using_correct_backend."""
    assert default_task_backend == task_backends["default"]
    assert isinstance(task_backends["default"], InterlockBackend)
    assert default_task_backend.alias == "default"
    assert default_task_backend.options == {}
    assert default_task_backend.queues == {"default"}


def test_check(rt):
    """django-tasks-db tests.py: test_check (the configured backend has no errors); and the
    deliberate difference, empty QUEUES is an error here (ilr.E010), where Django reads it as
    "any queue" (Django test_tasks.py test_unknown_queue_name's second half)."""
    assert list(default_task_backend.check()) == []
    empty = InterlockBackend("empty", {"QUEUES": []})
    assert [e.id for e in empty.check()] == ["ilr.E010"]


def test_task_decorator(rt):
    """Django test_tasks.py: test_task_decorator (on this backend, tasks are InterlockTasks)."""
    for t in (test_tasks.noop_task, test_tasks.noop_task_async, test_tasks.noop_task_from_bare_decorator):
        assert isinstance(t, Task) and isinstance(t, InterlockTask)


def test_enqueue_task(rt):
    """Django test_tasks.py: test_enqueue_task; django-tasks-db tests.py: test_enqueue_task
    (a READY result with a uuid4 id, no timestamps but enqueued_at, and one task_enqueued
    signal sent by the backend's class)."""
    for t in (test_tasks.noop_task, test_tasks.noop_task_async):
        with enqueued_signals() as received:
            result = t.enqueue(1, two=3)
        assert_ready(result, t, [1], {"two": 3})
        assert received == [(InterlockBackend, result)]


def test_enqueue_task_async(rt):
    """Django test_tasks.py: test_enqueue_task_async; django-tasks-db tests.py:
    test_enqueue_task_async."""

    async def body():
        for t in (test_tasks.noop_task, test_tasks.noop_task_async):
            with enqueued_signals() as received:
                result = await t.aenqueue()
            assert_ready(result, t, [], {})
            assert received == [(InterlockBackend, result)]

    run(body)


def test_enqueue_with_invalid_argument(rt):
    """Django test_tasks.py: test_enqueue_with_invalid_argument and
    test_aenqueue_with_invalid_argument: arguments that are not JSON raise TypeError
    "Unsupported type" (here an ilr.InvalidInput that is also that TypeError), and nothing is
    enqueued."""
    from ilr import InvalidInput

    with pytest.raises(TypeError, match="Unsupported type") as err:
        test_tasks.noop_task.enqueue(dt.datetime.now())
    assert isinstance(err.value, InvalidInput)

    async def body():
        with pytest.raises(TypeError, match="Unsupported type"):
            await test_tasks.noop_task.aenqueue(dt.datetime.now())

    run(body)
    assert count_in_new_connection() == 0


def test_using(rt, settings):
    """Django test_tasks.py: test_using_priority, test_using_queue_name, test_using_run_after,
    test_using_creates_new_instance, test_chained_using (``using`` returns a new Task and leaves
    the original as it was)."""
    settings.TASKS = TWO_QUEUES
    noop = test_tasks.noop_task
    assert noop.priority == 0
    assert noop.using(priority=1).priority == 1
    assert noop.priority == 0

    assert noop.queue_name == "default"
    assert noop.using(queue_name="queue_1").queue_name == "queue_1"
    assert noop.queue_name == "default"

    now = timezone.now()
    assert noop.run_after is None
    assert noop.using(run_after=now).run_after == now
    assert noop.run_after is None

    new_task = noop.using()
    assert new_task == noop and new_task is not noop
    assert isinstance(new_task, InterlockTask)

    run_after_task = noop.using(run_after=now)
    priority_task = run_after_task.using(priority=10)
    assert (priority_task.priority, priority_task.run_after) == (10, now)
    assert run_after_task.priority == 0


def test_using_keeps_interlock_options(rt):
    """Beyond the origin: ``using`` copies this backend's own task options too."""
    copy = test_tasks.noop_task.using(priority=5)
    assert (copy.max_attempts, copy.backoff, copy.timeout) == (1, None, None)


def test_using_unknown_backend(rt):
    """Django test_tasks.py: test_using_unknown_backend (InvalidTaskBackend; on the backport
    InvalidTaskBackendError)."""
    assert test_tasks.noop_task.backend == "default"
    with pytest.raises(InvalidTaskBackend, match="The connection 'unknown' doesn't exist."):
        test_tasks.noop_task.using(backend="unknown")


def test_naive_datetime(rt):
    """Django test_tasks.py: test_naive_datetime."""
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime."):
        test_tasks.noop_task.using(run_after=dt.datetime.now())


def test_invalid_priority(rt):
    """Django test_tasks.py: test_invalid_priority."""
    message = f"priority must be a whole number between {TASK_MIN_PRIORITY} and {TASK_MAX_PRIORITY}."
    for priority in (-101, 101, 3.1):
        with pytest.raises(InvalidTask, match=message):
            test_tasks.noop_task.using(priority=priority)
    for priority in (100, -100, 0):
        assert test_tasks.noop_task.using(priority=priority).priority == priority


def test_unknown_queue_name(rt):
    """Django test_tasks.py: test_unknown_queue_name (its first half; the second, QUEUES [] means
    any queue, is a deliberate difference: see test_check)."""
    with pytest.raises(InvalidTask, match="Queue 'queue-2' is not valid for backend."):
        test_tasks.noop_task.using(queue_name="queue-2")


def test_validate_on_enqueue(rt):
    """Django test_immediate_backend.py and django-tasks-db tests.py: test_validate_on_enqueue and
    test_validate_on_aenqueue (a Task made while its queue was valid is checked again at enqueue)."""
    with override_settings(TASKS={"default": {**TWO_QUEUES["default"], "QUEUES": ["unknown_queue"]}}):
        task_with_custom_queue_name = test_tasks.noop_task.using(queue_name="unknown_queue")
    with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
        task_with_custom_queue_name.enqueue()

    async def body():
        with pytest.raises(InvalidTask, match="Queue 'unknown_queue' is not valid for backend"):
            await task_with_custom_queue_name.aenqueue()

    run(body)
    assert count_in_new_connection() == 0


def test_invalid_function(rt):
    """Django test_tasks.py: test_invalid_function (a builtin, a method)."""
    for invalid_function in (any, _Holder().method):
        with pytest.raises(InvalidTask, match="Task function must be defined at a module level."):
            task()(invalid_function)

    def local():
        return None

    with pytest.raises(InvalidTask, match="Task function must be defined at a module level."):
        task()(local)


class _Holder:
    """Only an object with a method (Django passes its test method)."""

    def method(self):
        return None


def test_takes_context_without_taking_context(rt):
    """Django test_tasks.py: test_takes_context_without_taking_context."""
    with pytest.raises(InvalidTask, match="Task takes context but does not have a first argument of 'context'."):
        task(takes_context=True)(test_tasks.calculate_meaning_of_life.func)


def test_run_after_in_decorator(rt):
    """Django test_tasks.py: test_run_after_in_decorator. Django 6 refuses it with its own
    message; the backport with Python's "multiple values" TypeError: both a TypeError."""
    with pytest.raises(TypeError, match="run_after"):
        task(run_after=timezone.now())(test_tasks.calculate_meaning_of_life.func)


def test_call_task(rt):
    """Django test_tasks.py: test_call_task, test_call_task_async, test_call_async_task,
    test_call_async_task_sync (``call``/``acall`` run the function here, without the backend)."""
    assert test_tasks.calculate_meaning_of_life.call() == 42
    assert test_tasks.noop_task_async.call() is None

    async def body():
        assert await test_tasks.calculate_meaning_of_life.acall() == 42
        assert await test_tasks.noop_task_async.acall() is None

    run(body)
    assert count_in_new_connection() == 0


def test_get_backend_name_and_module_path(rt):
    """Django test_tasks.py: test_get_backend, test_name, test_module_path."""
    assert test_tasks.noop_task.backend == "default"
    assert isinstance(test_tasks.noop_task.get_backend(), InterlockBackend)
    assert test_tasks.noop_task.name == "noop_task"
    assert test_tasks.noop_task_async.name == "noop_task_async"
    assert test_tasks.noop_task.module_path == "tests.support.conformance_tasks.noop_task"
    for t in (test_tasks.noop_task, test_tasks.noop_task_async):
        assert import_string(t.module_path) is t


def test_pickle_task_and_result(rt):
    """Django test_tasks.py: test_pickle_task, test_unpickle_arbitrary_string,
    test_unpickle_non_task_object, test_pickle_task_result. Django 6 pickles a Task by its
    module path (``Task._reconstruct``), options of an InterlockTask included; the backport has
    no such reduction and its Tasks do not pickle: that is asserted too, so a backport that adds
    it shows up here."""
    t = test_tasks.noop_task.using(priority=3)
    result = t.enqueue()
    if not hasattr(Task, "_reconstruct"):
        with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
            pickle.dumps(t)
        return
    unpickled = pickle.loads(pickle.dumps(t))
    assert unpickled == t and type(unpickled) is InterlockTask
    assert unpickled.priority == 3 and unpickled.max_attempts == 1
    assert pickle.loads(pickle.dumps(result)) == result
    with pytest.raises(ValueError, match="Expected 'does.not.exist.fake_task' to point to a Task instance."):
        Task._reconstruct({"func": "does.not.exist.fake_task"})
    with pytest.raises(ValueError, match="Expected 'builtins.any' to point to a Task instance."):
        Task._reconstruct({"func": "builtins.any"})


def test_enqueue_logs(rt, caplog):
    """django-tasks-db tests.py: test_enqueue_logs (one DEBUG line on Django's tasks logger, naming
    the id; the logger is django.tasks, on the backport django_tasks)."""
    with caplog.at_level(logging.DEBUG, logger=LOGGER_NAME):
        result = test_tasks.noop_task.enqueue()
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]
    assert len(lines) == 1
    assert "enqueued" in lines[0] and result.id in lines[0]


def test_doesnt_wait_until_transaction_commit(rt):
    """django-tasks-db tests.py: test_doesnt_wait_until_transaction_commit, and
    DatabaseTaskResultTestCase.test_cross_connection: enqueue writes in the caller's transaction
    (no on_commit), so another connection sees the task once that commits."""
    with transaction.atomic():
        result = test_tasks.noop_task.enqueue()
        assert result.enqueued_at is not None
        assert default_task_backend.get_result(result.id) == result
        assert count_in_new_connection() == 0
    assert count_in_new_connection() == 1
    test_tasks.noop_task.enqueue()
    assert count_in_new_connection() == 2


# -- in-process: get_result and refresh of a READY task ------------------------------------------


def test_get_result(rt):
    """Django test_tasks.py: test_get_result; django-tasks-db tests.py: test_get_result."""
    result = default_task_backend.enqueue(test_tasks.noop_task, (), {})
    assert default_task_backend.get_result(result.id) == result
    assert test_tasks.noop_task.get_result(result.id) == result


def test_get_result_async(rt):
    """Django test_tasks.py: test_get_result_async; django-tasks-db tests.py:
    test_get_result_async."""

    async def body():
        result = await default_task_backend.aenqueue(test_tasks.noop_task, (), {})
        assert await default_task_backend.aget_result(result.id) == result
        assert await test_tasks.noop_task.aget_result(result.id) == result

    run(body)


def test_get_missing_result(rt):
    """Django test_tasks.py: test_get_missing_result; django-tasks-db tests.py:
    test_get_missing_result, test_async_get_missing_result, test_invalid_uuid,
    test_async_invalid_uuid."""
    for missing in (str(uuid.uuid4()), "123"):
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(missing)
        with pytest.raises(TaskResultDoesNotExist):
            test_tasks.noop_task.get_result(missing)

    async def body():
        for missing in (str(uuid.uuid4()), "123"):
            with pytest.raises(TaskResultDoesNotExist):
                await default_task_backend.aget_result(missing)
            with pytest.raises(TaskResultDoesNotExist):
                await test_tasks.noop_task.aget_result(missing)

    run(body)


def test_get_result_of_another_backend_does_not_exist(rt, settings):
    """Beyond the origin: a result id of another alias's task does not exist for this alias (as a
    DatabaseBackend filters by backend_name)."""
    settings.TASKS = {**TWO_QUEUES, "other": {"BACKEND": "ilr.tasks.InterlockBackend", "QUEUES": ["default"]}}
    result = test_tasks.noop_task.enqueue()
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["other"].get_result(result.id)


def test_get_incorrect_result(rt):
    """Django test_tasks.py: test_get_incorrect_result, test_get_incorrect_result_async."""
    result = default_task_backend.enqueue(test_tasks.noop_task_async, (), {})
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        test_tasks.noop_task.get_result(result.id)

    async def body():
        with pytest.raises(TaskResultMismatch, match="Task does not match"):
            await test_tasks.noop_task.aget_result(result.id)

    run(body)


def test_refresh_result_of_a_ready_task(rt):
    """Django test_tasks.py: test_refresh_result (refresh and arefresh of a task nobody ran leave
    every field as it was)."""
    result = test_tasks.noop_task.enqueue()
    original = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == original
    run(result.arefresh)
    assert dataclasses.asdict(result) == original
