"""Waiting on what another process does: a condition, a workflow's failure."""

from __future__ import annotations

import time

import pytest


def failure_of(rt, workflow_id: str, timeout: float = 30.0) -> dict:
    """Wait for ``workflow_id`` to end as failed; return its recorded error (type, message,
    and for InvalidInput the field and rule)."""
    from ilr import WorkflowFailed

    with pytest.raises(WorkflowFailed) as err:
        rt.result(workflow_id, timeout=timeout)
    assert err.value.status == "failed", err.value.error
    return err.value.error


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05, message: str = "condition"):
    """Poll ``predicate()`` until it returns a truthy value; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def failing(rt, wf_id: str, attempts: int) -> dict:
    """describe(wf_id) once the step has failed at least ``attempts`` times."""

    def ready():
        d = rt.describe(wf_id)
        err = d.get("last_error") or {}
        return d if err.get("attempt", 0) >= attempts else None

    return wait_for(ready, timeout=30, message=f"{wf_id} failed {attempts} attempts")
