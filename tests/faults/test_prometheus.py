"""The Prometheus endpoint (issue 46): a real Prometheus server (Debian's package) scrapes a real
worker's ``--metrics-port`` and PromQL over its HTTP API returns what the worker did; the web
process's ``ilr/metrics/`` view serves the same format."""

from __future__ import annotations

import urllib.request

from prove.peers.pg_cluster import free_port
from tests.support.prometheus import prometheus_server, query, targets_up
from tests.support.waits import wait_for


def value(url: str, promql: str) -> float | None:
    result = query(url, promql)
    return float(result[0]["value"][1]) if result else None


def test_prometheus_scrapes_the_worker_and_promql_returns_its_figures(rt, workers, tmp_path):
    """Five three-step workflows on a worker with --metrics-port: Prometheus, scraping it every
    200 ms, answers 5 completed workflows, 15 step attempts and 5 claims (schedule-to-start
    observations), and the claims' latency quantile is a number of seconds."""
    port = free_port()
    workers.start("M", args=("--metrics-port", str(port)))
    endpoint = f"http://127.0.0.1:{port}/metrics"

    def served():
        try:
            with urllib.request.urlopen(endpoint, timeout=2) as answer:
                return answer.read().decode()
        except OSError:
            return None

    wait_for(served, timeout=30, message="the worker's /metrics")
    for i in range(5):
        rt.start("three_steps", f"prom-{i}", {})
    for i in range(5):
        assert rt.result(f"prom-{i}", timeout=30) == {"counts": [1, 1, 1]}
    text = served()
    assert "interlock_workflows_ended_total{" in text and 'outcome="completed"' in text, text

    with prometheus_server(tmp_path, [f"127.0.0.1:{port}"]) as url:
        wait_for(lambda: targets_up(url), timeout=30, message="the worker scraped")
        ended = 'sum(interlock_workflows_ended_total{name="three_steps",outcome="completed"})'
        wait_for(lambda: value(url, ended) == 5.0, timeout=30, message=f"{ended} == 5")
        assert value(url, 'sum(interlock_step_duration_seconds_count{kind="step",outcome="ok"})') == 15.0
        assert value(url, 'sum(interlock_workflow_schedule_to_start_seconds_count{name="three_steps"})') == 5.0
        assert value(url, 'sum(interlock_runs_total{name="three_steps",outcome="completed"})') == 5.0
        p99 = value(url, "histogram_quantile(0.99, sum by (le) (interlock_workflow_schedule_to_start_seconds_bucket))")
        assert p99 is not None and 0 <= p99 < 60
        assert value(url, "sum(interlock_takeovers_total)") is None  # no lease lapsed: no series at all


def test_the_web_process_serves_the_metrics_view_when_telemetry_enables_prometheus(rt, client):
    """``ilr/metrics/``: the rt.start counter of this process, in Prometheus's text format."""
    from ilr._telemetry import hooks, setup

    setup.configure({"prometheus": True, "spans_memory": True})
    try:
        rt.start("three_steps", "prom-web", {})
        answer = client.get("/ilr/metrics/")
        assert answer.status_code == 200
        assert answer["Content-Type"].startswith("text/plain")
        body = answer.content.decode()
        assert 'interlock_workflows_started_total{name="three_steps"' in body, body
    finally:
        hooks.on = False


def test_the_started_counter_counts_a_start_once_not_its_idempotent_repeats(rt, client):
    """A client that retries its start (the same id, the same name) starts one workflow:
    ``interlock_workflows_started_total`` grows by one, not by the number of calls."""
    import re

    from ilr._telemetry import hooks, setup

    def started() -> float:
        body = client.get("/ilr/metrics/").content.decode()
        found = re.search(r'^interlock_workflows_started_total\{name="three_steps",[^}]*\} (\S+)$', body, re.M)
        return float(found.group(1)) if found else 0.0

    setup.configure({"prometheus": True})
    try:
        before = started()
        for _ in range(3):
            assert rt.start("three_steps", "prom-retried", {}) == "prom-retried"
        assert started() == before + 1
    finally:
        hooks.on = False
