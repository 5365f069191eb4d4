"""The state gauges (issue 46) through the Prometheus endpoint: a real worker with
``--metrics-port`` and ``ILR_TELEMETRY = {"state_gauges": true}``, a real Prometheus server
(Debian's package) scraping it, and PromQL over its HTTP API returning the figures of a known
state (tests/support/ops_state.py: 2 pending approvals, the oldest 120 s old, 1 ambiguous effect,
2 stuck workflows, refund@v1 unserved with 3 due)."""

from __future__ import annotations

import urllib.request

import pytest

from prove.peers.pg_cluster import free_port
from tests.support import ops_state
from tests.support.prometheus import prometheus_server, query, targets_up
from tests.support.queries.approvals import SET_APPROVAL_REQUESTS_STATUS_DECIDED_AT_BY_WORKFLOW_ID
from tests.support.waits import wait_for


def value(url: str, promql: str) -> float | None:
    result = query(url, promql)
    return float(result[0]["value"][1]) if result else None


# The seed writes ambiguous effects with a send and no journal (their chain is not what this test is
# about): EverySendJournaled is allowed to fail over them.
@pytest.mark.allow_violations("EverySendJournaled")
def test_prometheus_scrapes_the_state_gauges_and_promql_returns_the_figures(rt, workers, tmp_path):
    ops_state.seed(rt.connection())
    port = free_port()
    workers.start(
        "G", env={"ILR_TELEMETRY": '{"state_gauges": true}'}, args=("--metrics-port", str(port), "--no-schedules")
    )
    endpoint = f"http://127.0.0.1:{port}/metrics"

    def served():
        try:
            with urllib.request.urlopen(endpoint, timeout=2) as answer:
                return answer.read().decode()
        except OSError:
            return None

    wait_for(lambda: "interlock_approvals_pending" in (served() or ""), timeout=30, message="the gauges served")
    with prometheus_server(tmp_path, [f"127.0.0.1:{port}"]) as url:
        wait_for(lambda: targets_up(url), timeout=30, message="the worker scraped")
        wait_for(
            lambda: value(url, "interlock_approvals_pending") == ops_state.PENDING_APPROVALS,
            timeout=30,
            message="interlock_approvals_pending == 2",
        )
        assert value(url, f"interlock_approval_oldest_age_seconds >= {ops_state.OLDEST_APPROVAL_AGE}") is not None
        assert value(url, "interlock_effects_ambiguous") == 1
        assert value(url, "interlock_workflows_stuck") == 2
        unserved = 'interlock_versions_unserved{workflow_name="refund",workflow_version="v1"}'
        assert value(url, unserved) == ops_state.DUE_V1
        assert value(url, 'interlock_workflows_due{workflow_version="v1"}') == ops_state.DUE_V1
        assert value(url, "interlock_schedules_overdue") == 1
        assert value(url, 'interlock_worker_runs{worker_id="G"}') == 0  # G is live and holds no run
        assert value(url, "interlock_workers_live") == 1  # G itself
        assert value(url, "interlock_figures_up") == 1
        # A change in the database reaches PromQL within the cache period and a scrape.
        rt.connection().execute(SET_APPROVAL_REQUESTS_STATUS_DECIDED_AT_BY_WORKFLOW_ID)
        wait_for(lambda: value(url, "interlock_approvals_pending") == 1, timeout=30, message="1 pending after expiry")
