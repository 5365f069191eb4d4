"""The workflow a Django task runs as: its attempts, with durable backoff between them.

Registered as ``task:<queue>`` at version ``TASK_WORKFLOW_VERSION`` for every queue of every
``InterlockBackend`` in ``TASKS``. A deployed (name, version) is pinned to this module's source
hash (docs/protocol.md §4), so any edit here that changes what a replay does needs a new version.
"""

from __future__ import annotations

from typing import Any

from ilr._errors import TaskFailed
from ilr._retry import RetryPolicy

TASK_WORKFLOW_VERSION = "1"
"""The version of every ``task:<queue>`` workflow."""

TASK_WORKFLOW_PREFIX = "task:"
"""A task's workflow name is this prefix and its queue name."""

_ONE_ATTEMPT = RetryPolicy(max_attempts=1)  # an attempt step never raises: it records the error


def workflow_name(queue_name: str) -> str:
    """The workflow name of the tasks of ``queue_name``."""
    return TASK_WORKFLOW_PREFIX + queue_name


def backoff_policy(options: dict[str, Any]) -> RetryPolicy:
    """The RetryPolicy of a task's input options (``max_attempts`` 0: unlimited)."""
    backoff = options.get("backoff") or {}
    return RetryPolicy(
        initial=backoff.get("initial", 1.0),
        backoff=backoff.get("backoff", 2.0),
        max_interval=backoff.get("max_interval"),
        max_attempts=options.get("max_attempts", 1),
    )


def run_task(ctx, input: dict[str, Any]) -> dict[str, Any]:
    """Attempt the task until it returns or its attempts run out, sleeping durably between them.

    A failed attempt is a recorded step. A successful one is not: its outcome is the workflow's
    result, written by the finish (one commit fewer per task; ``_begin_unrecorded``).

    Returns:
        the successful attempt's outcome: {"ok": True, "value" (the task's return value),
        "worker", "attempt", "started_at", "finished_at"}.

    Raises:
        TaskFailed: the last attempt raised. Cancelled: the task was cancelled.
    """
    from ilr._tasks.attempt import run_attempt

    policy = backoff_policy(input)
    workers: list[str] = []
    attempt = 0
    while True:
        attempt += 1
        last = policy.max_attempts != 0 and attempt >= policy.max_attempts
        args = (ctx.workflow_id, input, attempt, list(workers), ctx._run.owner, last)
        if ctx._begin_unrecorded("attempt"):
            outcome = run_attempt(*args)
            if outcome["ok"]:
                return outcome
            outcome = ctx.step("attempt", _recorded, outcome, retry=_ONE_ATTEMPT)
        else:
            outcome = ctx.step("attempt", run_attempt, *args, retry=_ONE_ATTEMPT)
        workers.append(outcome["worker"])
        if outcome["ok"]:
            return outcome
        if last:
            raise TaskFailed(f"attempt {attempt} of {policy.max_attempts}: {outcome['error']['exception_class_path']}")
        ctx.sleep(policy.interval(attempt))


def _recorded(outcome: dict[str, Any]) -> dict[str, Any]:
    return outcome  # the attempt already ran: its step records this outcome
