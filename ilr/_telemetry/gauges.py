"""The state figures as OpenTelemetry observable gauges on the meter ``interlock``
(``opentelemetry.metrics.get_meter("interlock")``): what an operator alerts on (pending approvals
and the oldest one's age, ambiguous effects, stuck workflows, due work and its lag per version,
unserved versions, worker slots, keys, queues, schedule lag). Names and labels:
docs/guides/operations-page.md, "Gauges".

Every gauge's callback reads one shared ``FiguresCache``: one read of ``figures_on`` serves
every gauge of a collection, and further collections within ``cache_seconds`` (a scrape storm
reads the database once per period). The cache reads on a connection of its own, opened on
first use and replaced when it dies. A failed read is logged once per outage; the gauges then
report nothing but ``interlock.figures.up`` = 0, so an alert on a stale value cannot fire on a
figure that is no longer read (alert on ``interlock_figures_up == 0`` or on absence).

Register in one process per deployment (the one that serves metrics, e.g. the web app): each
process reads the same database, so two registering processes report the same series twice
(aggregate with ``max by``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ilr import _db as db
from ilr._telemetry.figures import STUCK_AFTER, Figures, figures_on

log = logging.getLogger("ilr.telemetry")

METER_NAME = "interlock"
"""The meter every Interlock instrument is on."""

CACHE_SECONDS = 5.0
"""Seconds one read of the figures serves every collection. Default 5."""


class FiguresCache:
    """The last figures read, refreshed at most every ``cache_seconds``; thread-safe.

    Args:
        connect: returns a new psycopg connection (default ``ilr.connect`` on Django's
            DATABASES["default"]).
        cache_seconds: how long one read serves (>= 0).
        stuck_after: ``figures_on``' threshold in seconds.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        connect: Callable[[], Any] | None = None,
        *,
        cache_seconds: float = CACHE_SECONDS,
        stuck_after: float = STUCK_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._connect = connect or (lambda: db.connect(db.conninfo(), application_name="ilr-telemetry-gauges"))
        self.cache_seconds = cache_seconds
        self.stuck_after = stuck_after
        self._clock = clock
        self._lock = threading.Lock()
        self._conn: Any = None
        self._figures: Figures | None = None
        self._read_at = float("-inf")
        self.reads = 0
        """How many times the database was read (each serves up to cache_seconds)."""
        self.up = False
        """Whether the last read succeeded."""

    def get(self) -> Figures | None:
        """The figures, read again when the last read is older than ``cache_seconds``; None when
        the last read failed (logged once until a read succeeds again)."""
        with self._lock:
            now = self._clock()
            if now - self._read_at < self.cache_seconds:
                return self._figures
            self._read_at = now
            try:
                if not db.usable(self._conn):
                    db.discard(self._conn)
                    self._conn = None
                    self._conn = self._connect()
                self._figures = figures_on(self._conn, stuck_after=self.stuck_after)
                self.reads += 1
                if not self.up:
                    log.info("operations figures read (gauges up)")
                self.up = True
            except Exception as exc:  # noqa: BLE001 - a scrape never fails for the database
                if self.up or self.reads == 0:
                    log.warning("operations figures could not be read (%s); gauges report nothing meanwhile", exc)
                db.discard(self._conn)
                self._conn = None
                self._figures = None
                self.up = False
            return self._figures

    def close(self) -> None:
        """Close the cache's connection."""
        with self._lock:
            db.discard(self._conn)
            self._conn = None


def _observations(cache: FiguresCache, read: Callable[[Figures], Iterable[tuple[float, dict]]]):
    """An observable callback: ``read(figures)``'s (value, attributes) pairs as Observations,
    none when the figures could not be read."""
    from opentelemetry.metrics import Observation

    def callback(_options):
        figures = cache.get()
        if figures is None:
            return []
        return [Observation(value, attrs) for value, attrs in read(figures)]

    return callback


def _one(value: Callable[[Figures], float]) -> Callable[[Figures], list[tuple[float, dict]]]:
    return lambda f: [(value(f), {})]


def _pair(d: dict) -> dict:
    return {"workflow.name": d["name"], "workflow.version": d["version"]}


GAUGES: list[tuple[str, str, str, Callable[[Figures], Iterable[tuple[float, dict]]]]] = [
    (
        "interlock.approvals.pending",
        "{request}",
        "Approval requests waiting for a person.",
        _one(lambda f: f.approvals_pending),
    ),
    (
        "interlock.approval.oldest_age",
        "s",
        "Age of the oldest pending approval request; 0 with none.",
        _one(lambda f: f.approval_oldest_age_s or 0.0),
    ),
    (
        "interlock.effects.ambiguous",
        "{effect}",
        "Effects whose outcome is unknown (AMBIGUOUS) and that no person has reconciled.",
        _one(lambda f: f.effects_ambiguous),
    ),
    (
        "interlock.workflows.stuck",
        "{workflow}",
        "Workflows stuck (status stuck, or running with a lease lapsed past the threshold, untaken).",
        _one(lambda f: f.workflows_stuck),
    ),
    (
        "interlock.workflows.due",
        "{workflow}",
        "Workflows a worker would claim now, per workflow name and version.",
        lambda f: [(d["due"], _pair(d)) for d in f.due],
    ),
    (
        "interlock.workflows.due.oldest_age",
        "s",
        "How long the oldest due workflow of a name and version has waited (queue lag).",
        lambda f: [(d["oldest_age_s"], _pair(d)) for d in f.due],
    ),
    (
        "interlock.versions.unserved",
        "{workflow}",
        "Due workflows of a name and version that no live worker serves.",
        lambda f: [(u["due"], _pair(u)) for u in f.unserved],
    ),
    ("interlock.workers.live", "{worker}", "Workers with a live registration.", _one(lambda f: f.workers_live)),
    (
        "interlock.worker.runs",
        "{run}",
        "Runs a worker holds under a live lease (its worker slots in use).",
        lambda f: [(w["runs"], {"worker.id": w["worker_id"]}) for w in f.workers],
    ),
    (
        "interlock.keys.holding",
        "{slot}",
        "Slots of concurrency keys and ctx.lock keys held.",
        _one(lambda f: f.keys["holding"]),
    ),
    (
        "interlock.keys.waiting",
        "{workflow}",
        "Workflows waiting for a slot of a concurrency key or ctx.lock key.",
        _one(lambda f: f.keys["waiting"]),
    ),
    (
        "interlock.keys.oldest_waiting_age",
        "s",
        "How long the oldest waiter of any key has waited; 0 with none.",
        _one(lambda f: f.keys["oldest_waiting_age_s"] or 0.0),
    ),
    (
        "interlock.queue.depth",
        "{workflow}",
        "Starts waiting in an ILR_QUEUES queue (waiting for a slot or put off by a per-key rate).",
        lambda f: [(q["waiting"] + q["put_off"], {"queue": q["queue"]}) for q in f.queues],
    ),
    (
        "interlock.queue.holding",
        "{slot}",
        "Slots of an ILR_QUEUES queue held.",
        lambda f: [(q["holding"], {"queue": q["queue"]}) for q in f.queues],
    ),
    (
        "interlock.queue.oldest_waiting_age",
        "s",
        "How long the oldest waiter of a queue has waited; 0 with none.",
        lambda f: [(q["oldest_waiting_age_s"] or 0.0, {"queue": q["queue"]}) for q in f.queues],
    ),
    (
        "interlock.schedules.overdue",
        "{schedule}",
        "Unpaused schedules past their fire time by more than the grace (no worker ticks them).",
        _one(lambda f: f.schedules_overdue),
    ),
    (
        "interlock.schedules.lag",
        "s",
        "How far past its fire time the most overdue unpaused schedule is; 0 with none.",
        _one(lambda f: f.schedule_lag_s),
    ),
]
"""Every gauge: (instrument name, UCUM unit, description, figures -> [(value, attributes)])."""

_registered: dict[Any, FiguresCache] = {}
_registered_lock = threading.Lock()


def register_gauges(meter_provider: Any = None, cache: FiguresCache | None = None) -> FiguresCache:
    """Create the observable gauges (GAUGES and ``interlock.figures.up``) on the ``interlock``
    meter of ``meter_provider`` (default the global one). Once per provider (the global one counts
    once, whichever provider it is then): a second call returns the first call's cache.

    Args:
        meter_provider: an OpenTelemetry MeterProvider; None: ``opentelemetry.metrics``' global.
        cache: the FiguresCache the callbacks read; default a new one on Django's database.

    Returns:
        the FiguresCache the gauges read.

    Raises:
        ImportError: opentelemetry-api is not installed.
    """
    from opentelemetry import metrics

    provider = meter_provider or metrics.get_meter_provider()
    # The global provider counts once whatever it is now: instruments made on the API's proxy
    # provider move to the SDK provider set later (ILR_TELEMETRY installs it after this may run).
    key: Any = "global" if meter_provider is None else id(provider)
    with _registered_lock:
        if key in _registered:
            return _registered[key]
        cache = cache or FiguresCache()
        meter = provider.get_meter(METER_NAME)
        for name, unit, description, read in GAUGES:
            meter.create_observable_gauge(
                name, callbacks=[_observations(cache, read)], unit=unit, description=description
            )

        def up(_options):
            from opentelemetry.metrics import Observation

            cache.get()
            return [Observation(1 if cache.up else 0, {})]

        meter.create_observable_gauge(
            "interlock.figures.up",
            callbacks=[up],
            unit="",
            description="1 when the last read of the figures succeeded.",
        )
        _registered[key] = cache
        return cache
