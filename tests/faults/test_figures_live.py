"""The operations figures (issue 46) with a real worker subprocess: the runs it holds are its
worker slots in use, and the version it serves is not unserved."""

from __future__ import annotations

from ilr._telemetry.figures import figures_on
from tests.support.db import invocations
from tests.support.waits import wait_for


def test_worker_slots_in_use_are_the_runs_a_live_worker_holds(rt, workers):
    """A real worker holding one run (a 30 s step) is live with 1 run; its version is served."""
    workers.start("w1", lease_ttl=5)
    rt.start("slow", "held", {"seconds": 30})
    wait_for(lambda: invocations(rt, "held", "nap") == 1, message="w1 inside the step")
    f = figures_on(rt.connection())
    assert f.workers_live == 1 and f.runs_held == 1
    assert [(w["worker_id"], w["runs"]) for w in f.workers] == [("w1", 1)]
    assert f.unserved == [] and f.due == []
