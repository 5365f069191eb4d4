"""Bad input (issue 2) that only a running workflow meets: a negative sleep fails the workflow;
a session time zone other than UTC changes no timer. Real worker subprocesses. The rest is in
tests/integration/test_bad_input.py."""

from __future__ import annotations

import pytest

from ilr import WorkflowFailed
from tests.support.queries.workflows import DUE_CREATED_AT_OF_WORKFLOWS_BY_ID
from tests.support.waits import wait_for


def test_negative_sleep_fails_the_workflow_not_leaves_it_running(rt, workers):
    workers.start("w1")
    rt.start("sleeper", "neg", {"seconds": -3})
    with pytest.raises(WorkflowFailed) as err:
        rt.result("neg", timeout=20)
    assert err.value.status == "failed" and err.value.error["field"] == "seconds"
    assert rt.describe("neg")["steps"] == []


def test_non_utc_session_time_zone_changes_no_timer(rt, workers):
    """All comparisons are in the database clock: a worker whose session time zone is far
    from UTC sleeps exactly as long (TimerNotEarly) and holds its lease."""
    workers.start("w1", env={"PGTZ": "Pacific/Kiritimati"})  # UTC+14
    rt.start("sleeper", "tz", {"seconds": 2})
    wait_for(lambda: rt.describe("tz")["status"] in ("sleeping", "completed"), message="sleeping")
    assert rt.result("tz", timeout=20) == 1
    sleep_step = rt.describe("tz")["steps"][0]
    row = (
        rt.connection()
        .execute(
            DUE_CREATED_AT_OF_WORKFLOWS_BY_ID,
            (sleep_step["output"]["until"],),
        )
        .fetchone()
    )
    assert sleep_step["created_at"] >= row["due"]
    gap = (row["due"] - row["created_at"]).total_seconds()
    assert 1.9 <= gap <= 4, gap  # two seconds from start, not fourteen hours off
