"""What the engine calls where a thing happens: spans (``tracing``) and event metrics (``metrics``).

Every call site tests ``hooks.on`` first (one attribute read), so with telemetry off the engine
pays nothing more. ``ilr._telemetry.setup.configure`` sets it: on when ILR_TELEMETRY enables
telemetry, or when the process has an OpenTelemetry SDK provider of its own.
"""

from __future__ import annotations

import functools
from contextlib import nullcontext

from ilr._telemetry import ids, metrics, tracing

on = False
"""Whether the engine emits spans and event metrics (``setup.configure`` sets it)."""

NULL = nullcontext()
"""The shared no-op context manager of a hook that is off."""


def _attrs(run) -> dict:
    return {"name": run.name, "version": run.version}


def run_started(run, worker_id: str, schedule_to_start: float | None) -> None:
    """A worker starts running claim ``run`` on this thread."""

    attrs = _attrs(run)
    if schedule_to_start is not None:
        metrics.schedule_to_start.record(max(schedule_to_start, 0.0), attrs)
    if run.took_over:
        metrics.takeovers.add(1, attrs)
    tracing.begin_run(run, worker_id, schedule_to_start)


def run_ended(run, outcome: str, exc: BaseException | None = None) -> None:
    """The run of claim ``run`` returned (``outcome``: suspended, completed, failed, ...)."""

    metrics.runs.add(1, {**_attrs(run), "outcome": outcome})
    tracing.end_run(run, outcome, exc)


def workflow_ended(run, status: str) -> None:
    """The fenced end of ``run``'s workflow committed with ``status``."""

    metrics.workflows_ended.add(1, {**_attrs(run), "outcome": status})
    tracing.workflow_ended(run, status, run.born_at)


def workflow_started(name: str, version: str) -> None:
    """``rt.start`` inserted a workflow of (name, version)."""

    metrics.workflows_started.add(1, {"name": name, "version": version})


def step(run, seq: int, kind: str, name: str, attempt: int):
    """The context manager around one attempt of a step (``kind`` "step") or decide call: its
    span and its metrics."""

    return tracing.StepSpan(run, seq, kind, name, attempt)


def effect(call):
    """The context manager around one ``ctx.effect`` call at the frontier (an EffectCallState whose
    ``seq`` is set): its span, whose outcome and grant ``effect_returned`` sets."""

    run = call.run
    return tracing.Phase(
        f"interlock.effect {call.name}",
        ids.span_id_for("effect", run.workflow_id, call.seq, run.epoch),
        {
            tracing.WORKFLOW_ID: run.workflow_id,
            tracing.EPOCH: run.epoch,
            tracing.SEQ: call.seq,
            tracing.EFFECT_ID: call.effect_id,
            tracing.TARGET: str(call.target_name),
            tracing.TIER: int(getattr(call.target, "tier", 0) or 0),
            tracing.PAYLOAD_HASH: call.payload_hash,
            **({tracing.GRANT_ID: str(call.grant)} if call.grant else {}),
        },
    )


def effect_returned(call, span, result) -> None:
    """``ctx.effect`` returned ``result`` (an EffectResult) at the frontier."""

    target = str(call.target_name)
    metrics.effects.add(1, {"target": target, "outcome": result.status})
    if result.refused:
        metrics.refusals.add(1, {"target": target, "reason": result.status.partition(":")[2] or result.status})
    span.set_attribute(tracing.RECEIPT_OUTCOME, result.status)


def phase(call, name: str):
    """The span of one phase of an effect call ("dispatch", "send", "commit", "recovery"), a
    child of the effect's span; NULL when telemetry is off."""
    if not on or getattr(call, "seq", None) is None:
        return NULL

    run = call.run
    return tracing.Phase(
        f"interlock.effect.{name}",
        ids.span_id_for(f"effect.{name}", run.workflow_id, call.seq, run.epoch, _count(call, name)),
        {tracing.EFFECT_ID: call.effect_id, tracing.SEQ: call.seq},
    )


def _count(call, name: str) -> int:
    """How many ``name`` phases this call has begun (a call may go round: a reroute, a resend)."""
    counts = call.__dict__.setdefault("_telemetry_phases", {})
    counts[name] = counts.get(name, 0) + 1
    return counts[name]


def approval_decided(run, seq: int, request: dict) -> None:
    """The outcome of approval request ``request`` (its decided row) was settled at ``seq``."""

    tracing.approval_decided(run, seq, request)


def traced(name: str):
    """Decorate a step of the effect procedure (a function whose first argument is the
    EffectCallState) as the effect's ``name`` phase (see ``phase``)."""

    def decorate(step):
        @functools.wraps(step)
        def wrapper(call, *args, **kwargs):
            if not on:
                return step(call, *args, **kwargs)
            with phase(call, name):
                return step(call, *args, **kwargs)

        return wrapper

    return decorate


def traced_start(method):
    """Decorate ``Runtime.start``: with telemetry on, the call runs inside a span of the caller's
    trace (``tracing.caller_span``), which the workflow's spans descend from, and a start that
    inserted a workflow counts in ``interlock.workflows.started``."""

    @functools.wraps(method)
    def start(self, name, wf_id, *args, **kwargs):
        if not on:
            return method(self, name, wf_id, *args, **kwargs)
        with tracing.caller_span(f"interlock.start {name}", wf_id, {tracing.WORKFLOW_NAME: name}):
            started = method(self, name, wf_id, *args, **kwargs)
        if not getattr(started, "deduplicated", False) and not getattr(started, "existed", False):
            version = kwargs.get("version", args[1] if len(args) > 1 else None)
            workflow_started(name, self.resolve_version(name, version))
        return started

    return start


def traced_signal(method):
    """Decorate ``Runtime.signal``: with telemetry on, the call runs inside a span of the
    sender's trace, linked to the workflow's span (``signal_in`` adds the link)."""

    @functools.wraps(method)
    def signal(self, wf_id, name, *args, **kwargs):
        if not on:
            return method(self, wf_id, name, *args, **kwargs)
        with tracing.caller_span(f"interlock.signal {name}", wf_id, {tracing.SIGNAL_NAME: name}):
            return method(self, wf_id, name, *args, **kwargs)

    return signal
