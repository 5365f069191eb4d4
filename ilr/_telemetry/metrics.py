"""The runtime's event metrics, on the OpenTelemetry meter ``interlock`` (docs/guides/telemetry.md).

Counters and histograms of what happens, recorded where it happens (``ilr._telemetry.hooks``).
The state gauges (due work, pending approvals, ambiguous effects, slots) are read from the
database by ``ilr._telemetry.gauges`` on the same meter. Names follow OpenTelemetry's
conventions (dotted, unit in ``unit``); the Prometheus exporter turns ``interlock.workflows.ended``
into ``interlock_workflows_ended_total`` and a histogram in seconds into ``..._seconds_bucket``.
"""

from __future__ import annotations

from opentelemetry import metrics

meter = metrics.get_meter("interlock")

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
"""Seconds: a claim and a step range from a millisecond to minutes (a timer, a backlog)."""

workflows_started = meter.create_counter(
    "interlock.workflows.started",
    unit="{workflow}",
    description="Workflows started by rt.start in this process (name, version).",
)
workflows_ended = meter.create_counter(
    "interlock.workflows.ended",
    unit="{workflow}",
    description="Workflows that ended (name, version, outcome: completed, failed, cancelled, stuck, continued).",
)
schedule_to_start = meter.create_histogram(
    "interlock.workflow.schedule_to_start",
    unit="s",
    description="From the moment a workflow was due (available_at, or a lapsed lease's expiry) to its claim.",
    explicit_bucket_boundaries_advisory=_LATENCY_BUCKETS,
)
runs = meter.create_counter(
    "interlock.runs",
    unit="{run}",
    description="Claims run by this worker (name, version, outcome: suspended, completed, fenced, ...).",
)
takeovers = meter.create_counter(
    "interlock.takeovers",
    unit="{claim}",
    description="Claims that took a workflow whose previous owner's lease had lapsed (name, version).",
)
step_duration = meter.create_histogram(
    "interlock.step.duration",
    unit="s",
    description="One attempt of a step or decide call at the frontier (kind, outcome: ok, error).",
    explicit_bucket_boundaries_advisory=_LATENCY_BUCKETS,
)
step_retries = meter.create_counter(
    "interlock.step.retries",
    unit="{attempt}",
    description="Attempts of a step or decide call after its first (kind).",
)
effects = meter.create_counter(
    "interlock.effects",
    unit="{effect}",
    description="Effect calls that returned at the frontier (target, outcome: the EffectResult status).",
)
refusals = meter.create_counter(
    "interlock.effect.refusals",
    unit="{effect}",
    description="Effects refused (target, reason: the REFUSED_* status).",
)
