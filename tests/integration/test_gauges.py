"""The state gauges (``ilr._telemetry.gauges``, issue 46) on a real MeterProvider with the SDK's
InMemoryMetricReader, over real PostgreSQL holding a known state (tests/support/ops_state.py):
each gauge's value and labels, one database read per cache period however many collections, and
a database that cannot be read reported as ``interlock.figures.up`` 0 with no stale figures.
The Prometheus endpoint scraped by a real Prometheus: tests/faults/test_gauges_prometheus.py."""

from __future__ import annotations

from psycopg.conninfo import make_conninfo

from ilr import _db as db
from ilr._telemetry.gauges import FiguresCache, register_gauges
from tests.support import ops_state
from tests.support.queries.approvals import SET_APPROVAL_REQUESTS_STATUS_DECIDED_AT_BY_WORKFLOW_ID


def _provider():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    return MeterProvider(metric_readers=[reader]), reader


def collected(reader) -> dict[str, list[tuple[dict, float]]]:
    """{instrument name: [(attributes, value)]} of one collection."""
    out: dict[str, list[tuple[dict, float]]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            assert sm.scope.name == "interlock"
            for m in sm.metrics:
                out[m.name] = [(dict(p.attributes), p.value) for p in m.data.data_points]
    return out


class Clock:
    """A monotonic clock the test moves by hand (the cache period without a sleep)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_gauges_report_the_figures_and_a_scrape_storm_reads_once(rt, test_dsn):
    ops_state.seed(rt.connection())
    provider, reader = _provider()
    clock = Clock()
    cache = register_gauges(provider, FiguresCache(lambda: db.connect(test_dsn), cache_seconds=5, clock=clock))
    try:
        assert register_gauges(provider) is cache  # once per provider
        got = collected(reader)
        assert got["interlock.approvals.pending"] == [({}, ops_state.PENDING_APPROVALS)]
        ((_, age),) = got["interlock.approval.oldest_age"]
        assert ops_state.OLDEST_APPROVAL_AGE <= age < ops_state.OLDEST_APPROVAL_AGE + 30
        assert got["interlock.effects.ambiguous"] == [({}, 1)]
        assert got["interlock.workflows.stuck"] == [({}, 2)]
        v1 = {"workflow.name": "refund", "workflow.version": "v1"}
        assert (v1, ops_state.DUE_V1) in got["interlock.workflows.due"]
        assert (v1, 3) in got["interlock.versions.unserved"]
        assert got["interlock.keys.waiting"] == [({}, 1)]
        assert got["interlock.schedules.overdue"] == [({}, 1)]
        assert got["interlock.figures.up"] == [({}, 1)]
        assert cache.reads == 1  # every gauge of the collection from one read
        for _ in range(20):
            collected(reader)
        assert cache.reads == 1  # the storm within the period: no further read
        rt.connection().execute(SET_APPROVAL_REQUESTS_STATUS_DECIDED_AT_BY_WORKFLOW_ID)
        clock.now += 5
        assert collected(reader)["interlock.approvals.pending"] == [({}, 1)]
        assert cache.reads == 2
    finally:
        cache.close()


def test_an_unreadable_database_is_up_0_and_reports_no_stale_figures(rt, test_dsn):
    ops_state.seed(rt.connection())
    provider, reader = _provider()
    clock = Clock()
    dsn = {"value": test_dsn}
    cache = register_gauges(provider, FiguresCache(lambda: db.connect(dsn["value"]), cache_seconds=5, clock=clock))
    try:
        assert collected(reader)["interlock.approvals.pending"] == [({}, 2)]
        cache.close()  # the next read connects again: to a database that does not exist
        dsn["value"] = make_conninfo(test_dsn, dbname="ilr_no_such_database")
        clock.now += 5
        got = collected(reader)
        assert got["interlock.figures.up"] == [({}, 0)]
        assert "interlock.approvals.pending" not in got or got["interlock.approvals.pending"] == []
        dsn["value"] = test_dsn
        clock.now += 5
        got = collected(reader)
        assert got["interlock.figures.up"] == [({}, 1)] and got["interlock.approvals.pending"] == [({}, 2)]
    finally:
        cache.close()
