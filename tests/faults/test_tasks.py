"""Django's Tasks framework on Interlock (``ilr.tasks.InterlockBackend``), with real worker
subprocesses: enqueue inside the caller's transaction, results, retries with backoff, async tasks
on the worker's event loop, priority, run_after, timeout, cancel, --queue, and a worker SIGKILL."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction

from ilr import InvalidInput
from ilr._tasks.compat import InvalidTask, TaskResultDoesNotExist, TaskResultStatus
from tests.support import tasks
from tests.support.queries.steps import KIND_OF_STEPS_BY_WORKFLOW_ID
from tests.support.queries.workflows import COUNT_WORKFLOWS
from tests.support.waits import wait_for


def invocations(rt, task_id: str | None = None, name: str | None = None) -> list[dict]:
    sql = "select workflow_id, name, pid from public.test_invocations where true"
    params: list = []
    if task_id:
        sql += " and workflow_id = %s"
        params.append(task_id)
    if name:
        sql += " and name like %s"
        params.append(name)
    return rt.connection().execute(sql + " order by id", params).fetchall()


def finished(result, timeout: float = 30.0):
    def done():
        result.refresh()
        return result.is_finished

    wait_for(done, timeout=timeout, message=f"task {result.id} to finish")
    return result


def test_enqueue_rolls_back_and_commits_with_the_callers_transaction(rt, workers):
    workers.start("w1")
    with pytest.raises(RuntimeError), transaction.atomic():
        doomed = tasks.add.enqueue(1, 2)
        # Inside the transaction the task exists for it, and for nobody else yet.
        assert tasks.add.get_result(doomed.id).status == TaskResultStatus.READY
        assert rt.connection().execute(COUNT_WORKFLOWS).fetchone()["n"] == 0
        raise RuntimeError("roll back")
    with transaction.atomic():
        kept = tasks.add.enqueue(2, 3)
    assert finished(kept).status == TaskResultStatus.SUCCESSFUL
    assert kept.return_value == 5
    assert kept.worker_ids == ["w1"] and kept.attempts == 1 and kept.errors == []
    assert kept.enqueued_at <= kept.started_at <= kept.last_attempted_at <= kept.finished_at
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result(doomed.id)
    # The committed task ran once; the rolled-back one never.
    assert [r["workflow_id"] for r in invocations(rt)] == [kept.id]


def test_retries_back_off_durably_and_keep_every_error(rt, workers):
    workers.start("w1")
    result = finished(tasks.flaky.enqueue(2))
    assert result.status == TaskResultStatus.SUCCESSFUL, result.errors
    assert result.return_value == {"attempt": 3, "workers": ["w1", "w1", "w1"]}
    assert result.attempts == 3
    assert [e.exception_class for e in result.errors] == [ConnectionError, ConnectionError]
    assert "attempt 2 fails on purpose" in result.errors[1].traceback
    # Each wait between attempts was a durable sleep step, not a sleep in the worker.
    kinds = [r["kind"] for r in rt.connection().execute(KIND_OF_STEPS_BY_WORKFLOW_ID, (result.id,)).fetchall()]
    # The successful attempt is no step: the finish records it, one commit fewer per task.
    assert kinds == ["step", "sleep", "step", "sleep"]
    assert rt.describe(result.id)["result"]["value"] == {
        "attempt": 3,
        "workers": ["w1", "w1", "w1"],
    }


def test_a_failing_task_reads_failed_with_its_traceback(rt, workers):
    workers.start("w1")
    result = finished(tasks.always_fails.enqueue())
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in result.errors] == [ValueError]
    assert "this task always fails" in result.errors[0].traceback
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018 - the property raises
    assert len(invocations(rt, result.id)) == 1  # max_attempts defaults to 1, as Django's backends


def test_an_async_task_runs_on_the_workers_event_loop_and_times_out(rt, workers):
    workers.start("w1")
    first, second = finished(tasks.async_where.enqueue()), finished(tasks.async_where.enqueue())
    assert first.return_value["thread"] == "ilr-tasks-loop"
    assert first.return_value["loop"] == second.return_value["loop"]  # one loop per worker process
    late = finished(tasks.async_too_long.enqueue())
    assert late.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in late.errors] == [TimeoutError]


def test_higher_priority_runs_first_and_run_after_defers(rt, workers):
    low = tasks.log_order.using(priority=-5).enqueue("low")
    normal = tasks.log_order.enqueue("normal")
    high = tasks.log_order.using(priority=10).enqueue("high")
    later = tasks.log_order.using(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1.5)).enqueue("later")
    workers.start("w1", concurrency=1)
    for r in (low, normal, high):
        finished(r)
    finished(later)
    order = [r["name"] for r in invocations(rt, name="order:%")]
    assert order == ["order:high", "order:normal", "order:low", "order:later"]
    assert later.started_at >= later.task.run_after
    assert high.task.priority == 10


def test_cancel_before_it_runs_means_it_never_runs(rt, workers):
    deferred = tasks.add.using(run_after=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=60)).enqueue(1, 1)
    backend = tasks.add.get_backend()
    assert backend.cancel(deferred.id, by="ops") is True
    assert backend.cancel(deferred.id) is False
    workers.start("w1")
    finished(deferred, timeout=90)
    assert deferred.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in deferred.errors] == ["ilr.Cancelled"]
    assert invocations(rt, deferred.id) == []


def test_a_worker_serves_only_its_queues(rt, workers):
    from tests.support.flows import three_steps  # noqa: F401 - registered for the start below

    rt.start("three_steps", "plain-wf", {})
    result = tasks.add.enqueue(4, 4)
    workers.start("tasks-only", args=("--queue", "default"))
    assert finished(result).return_value == 8
    assert rt.describe("plain-wf")["status"] == "pending"  # not a task: this worker leaves it
    bad = workers.start("bad", args=("--queue", "nope"))
    assert bad.wait(60) == 2
    assert "--queue: 'nope' is neither a queue of ILR_QUEUES" in workers.log("bad")


def test_a_worker_sigkilled_after_an_attempt_recorded_does_not_run_it_again(rt, workers):
    # flaky(1): the first attempt fails and is recorded; w1 dies right after that record.
    result = tasks.flaky.enqueue(1)
    w1 = workers.start("w1", env={"ILR_KILL_AT": "step_after_record"})
    assert w1.wait(60) == -9
    workers.start("w2")
    assert finished(result).return_value == {"attempt": 2, "workers": ["w1", "w2"]}
    # Attempt 1 ran once, on w1; attempt 2 once, on w2.
    assert [r["pid"] for r in invocations(rt, result.id)][0] == w1.pid
    assert len(invocations(rt, result.id)) == 2
    assert result.worker_ids == ["w1", "w2"]


def test_a_worker_sigkilled_after_the_finish_does_not_run_the_task_again(rt, workers):
    result = tasks.add.enqueue(20, 22)
    w1 = workers.start("w1")
    assert finished(result).return_value == 42
    workers.kill("w1")
    workers.start("w2")
    # w2 serves the queue; a later task runs there, and the finished one was not run again.
    assert finished(tasks.add.enqueue(1, 1)).worker_ids == ["w2"]
    assert len(invocations(rt, result.id)) == 1 and result.worker_ids == ["w1"]
    assert w1.returncode == -9


def test_a_worker_sigkilled_mid_attempt_is_taken_over_and_the_attempt_runs_again(rt, workers, tmp_path):
    gate = tmp_path / "gate"
    result = tasks.blocks_until.enqueue(str(gate))
    workers.start("w1")
    wait_for(lambda: invocations(rt, result.id), message="the first attempt to start")
    workers.kill("w1")
    gate.touch()
    workers.start("w2")
    assert finished(result).return_value == "done"
    # At least once: the body ran on both workers; one result, recorded once, from w2.
    assert len(invocations(rt, result.id)) == 2
    assert result.worker_ids == ["w2"]
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_bad_options_and_arguments_are_refused_naming_the_field_and_nothing_is_written(rt):
    """Each refusal names the field and the rule (a new user's tries, issue 41's docs pass): a
    priority or run_after of the wrong type (Django's own checks raise TypeError and
    AttributeError), an unknown queue (named with the queues there are), a non-JSON argument
    (named by its path), and a task whose path does not import back as the task (a worker
    imports it by that path: it would fail on every attempt and its result could not be read)."""
    with pytest.raises(InvalidTask, match=r"^priority: must be a whole number between -100 and 100, got '5'$"):
        tasks.add.using(priority="5")
    with pytest.raises(InvalidTask, match=r"^run_after: must be an aware datetime or None, got '2030-01-01'$"):
        tasks.add.using(run_after="2030-01-01")
    with pytest.raises(
        InvalidTask,
        match=r"^Queue 'nope' is not valid for backend. queue_name: not one of "
        r"TASKS\['default'\]\['QUEUES'\] \(default\)$",
    ):
        tasks.add.using(queue_name="nope")
    with pytest.raises(InvalidInput) as exc:
        tasks.add.enqueue(1, dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    assert exc.value.field == "args[1]" and exc.value.rule.startswith("a datetime is not JSON")
    with pytest.raises(InvalidInput) as exc:
        tasks.add.enqueue(a=1, b={"when": [1, {2}]})
    assert exc.value.field == "kwargs['b']['when'][1]" and exc.value.rule.startswith("a set is not JSON")
    from ilr.tasks import InterlockTask

    unbound = InterlockTask(func=tasks.unbound_body)
    with pytest.raises(InvalidTask, match=r"^task: 'tests.support.tasks.unbound_body' does not import as this task"):
        unbound.enqueue()
    assert rt.connection().execute(COUNT_WORKFLOWS).fetchone()["n"] == 0


def test_a_task_returning_a_value_that_is_not_json_fails_naming_it(rt, workers):
    workers.start("w1")
    result = finished(tasks.returns_a_set.enqueue())
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in result.errors] == [TypeError]
    assert "TypeError: return value: a set is not JSON" in result.errors[0].traceback
    assert "(tests.support.tasks.returns_a_set returned it)" in result.errors[0].traceback
