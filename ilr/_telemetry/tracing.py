"""The runtime's spans, on the OpenTelemetry API (docs/guides/telemetry.md).

The spans of one workflow, in the trace of its lineage's root id (``ilr._telemetry.ids``)::

    interlock.workflow  <name>        the whole workflow, emitted once when it ends
      interlock.run                   one claim: from the claim to the suspend or the end
        interlock.step | decide       one attempt of a step or decide call, at the frontier
        interlock.approval            the request, from the ask to the decision
        interlock.effect              one effect call, with its phases as children:
          interlock.effect.dispatch   T_dispatch
          interlock.effect.send       the send to the target
          interlock.effect.commit     T_commit
          interlock.effect.recovery   the recovery of an open dispatch

A call answered from the history (a replay) starts no span. Every span id is derived from the
work it covers (``ids.span_id_for``), so no two spans share one and a replay cannot repeat one.
The functions here are called only when ``ilr._telemetry.hooks.on`` is set.
"""

from __future__ import annotations

import time
from datetime import datetime

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from ilr._errors import Suspend
from ilr._telemetry import ids, metrics

NS = "interlock"
"""The attribute namespace: every attribute the runtime sets begins with ``interlock.``."""

WORKFLOW_ID = "interlock.workflow.id"
WORKFLOW_NAME = "interlock.workflow.name"
WORKFLOW_VERSION = "interlock.workflow.version"
WORKFLOW_OUTCOME = "interlock.workflow.outcome"
EPOCH = "interlock.workflow.epoch"
TAKEOVERS = "interlock.workflow.takeovers"
PARENT_ID = "interlock.workflow.parent_id"
WORKER_ID = "interlock.worker.id"
SCHEDULE_TO_START = "interlock.run.schedule_to_start_s"
RUN_OUTCOME = "interlock.run.outcome"
SEQ = "interlock.step.seq"
STEP_NAME = "interlock.step.name"
STEP_KIND = "interlock.step.kind"
ATTEMPT = "interlock.step.attempt"
EFFECT_ID = "interlock.effect.id"
TARGET = "interlock.effect.target"
TIER = "interlock.effect.tier"
PAYLOAD_HASH = "interlock.effect.payload_hash"
RECEIPT_OUTCOME = "interlock.effect.outcome"
GRANT_ID = "interlock.grant.id"
REQUEST_ID = "interlock.approval.request_id"
APPROVAL_OUTCOME = "interlock.approval.outcome"
SIGNAL_NAME = "interlock.signal.name"
SUSPENDED = "interlock.suspended"


def _ended_by(span, exc: BaseException | None) -> None:
    """Mark ``span`` by how its block ended: a Suspend that no failure caused (the workflow
    released its claim to wait) is not an error; any other exception, a failed attempt's retry
    included, is."""
    if exc is None:
        return
    if isinstance(exc, Suspend) and exc.__context__ is None:
        span.set_attribute(SUSPENDED, True)
        return
    span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))


_tracer = trace.get_tracer("interlock")


def bind_tracer() -> None:
    """Take the tracer from the provider installed now: the one taken at import is a proxy that
    forwards each call to it (``setup.configure`` calls this once a provider is in place)."""
    global _tracer
    _tracer = trace.get_tracer("interlock")


def _remote(trace_id: int, span_id: int, flags: int = TraceFlags.SAMPLED) -> otel_context.Context:
    """A context whose parent is the span (trace_id, span_id), wherever it is emitted."""
    parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    return trace.set_span_in_context(NonRecordingSpan(parent), otel_context.Context())


def _ns(value) -> int | None:
    """Nanoseconds since the epoch of a datetime (a database timestamp), else None."""
    return int(value.timestamp() * 1e9) if isinstance(value, datetime) else None


def _start(name: str, span_id: int, parent: otel_context.Context | None, attributes: dict, **kw):
    tokens = ids.want(span_id, kw.pop("trace_id", None))
    try:
        return _tracer.start_span(name, context=parent, attributes=attributes, **kw)
    finally:
        ids.release(tokens)


def started_from(run) -> SpanContext | None:
    """The span ``run``'s workflow descends from: the one its row's ``trace_context`` names (the
    start's span, or a child's parent workflow span), else None (its lineage's derived trace)."""
    if run.trace_parent is False:
        run.trace_parent = parse_traceparent(run.trace_context)
    return run.trace_parent


def trace_id_of(run) -> int:
    """The trace id of ``run``'s workflow: its start's trace, else its lineage root's derived one."""
    parent = started_from(run)
    return parent.trace_id if parent is not None else ids.trace_id_for(run.workflow_id)


def child_traceparent(run) -> str:
    """The ``trace_context`` of a child that ``run`` starts: its parent's workflow span, in the
    parent's trace (so a child with an id of its own stays in its parent's trace)."""
    return f"00-{trace_id_of(run):032x}-{ids.span_id_for('workflow', run.workflow_id):016x}-01"


def _workflow_parent(run) -> otel_context.Context:
    """The context of a workflow span: the span it was started from, else (a row from before
    trace contexts were kept) its parent workflow's span, else none."""
    parent = started_from(run)
    if parent is not None:
        return trace.set_span_in_context(NonRecordingSpan(parent), otel_context.Context())
    if run.parent_id:
        return _remote(ids.trace_id_for(run.workflow_id), ids.span_id_for("workflow", run.parent_id))
    return otel_context.Context()


def begin_run(run, worker_id: str, schedule_to_start: float | None) -> None:
    """Start the run span of claim ``run`` and make it current on this thread (``run.span``)."""
    wf = run.workflow_id
    started = started_from(run)  # its start's sampling decision holds for its runs too
    flags = started.trace_flags if started is not None else TraceFlags.SAMPLED
    parent = _remote(trace_id_of(run), ids.span_id_for("workflow", wf), flags)
    attributes = {
        WORKFLOW_ID: wf,
        WORKFLOW_NAME: run.name,
        WORKFLOW_VERSION: run.version,
        EPOCH: run.epoch,
        WORKER_ID: worker_id,
    }
    if run.takeovers:
        attributes[TAKEOVERS] = run.takeovers
    if schedule_to_start is not None:
        attributes[SCHEDULE_TO_START] = schedule_to_start
    span = _start(f"interlock.run {run.name}", ids.span_id_for("run", wf, run.epoch), parent, attributes)
    run.span = span
    run.span_token = otel_context.attach(trace.set_span_in_context(span))


def end_run(run, outcome: str, exc: BaseException | None = None) -> None:
    """End ``run``'s span with ``outcome`` ("suspended", "completed", "fenced", ...)."""
    span = run.span
    if span is None:
        return
    run.span = None
    span.set_attribute(RUN_OUTCOME, outcome)
    if exc is not None and outcome not in ("suspended", "completed", "continued"):
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"[:500]))
    span.end()
    otel_context.detach(run.span_token)


def workflow_ended(run, status: str, born_at) -> None:
    """Emit the workflow span of ``run``'s workflow, which ended ``status`` (once: only the
    claim whose fenced end committed calls this)."""
    wf = run.workflow_id
    attributes = {
        WORKFLOW_ID: wf,
        WORKFLOW_NAME: run.name,
        WORKFLOW_VERSION: run.version,
        WORKFLOW_OUTCOME: status,
    }
    if run.parent_id:
        attributes[PARENT_ID] = run.parent_id
    span = _start(
        f"interlock.workflow {run.name}",
        ids.span_id_for("workflow", wf),
        _workflow_parent(run),
        attributes,
        trace_id=trace_id_of(run),
        start_time=_ns(born_at),
        kind=SpanKind.INTERNAL,
    )
    if status in ("failed", "stuck"):
        span.set_status(Status(StatusCode.ERROR, status))
    span.end()


class StepSpan:
    """The span of one attempt of a step or decide call at the frontier, and its metrics (the
    attempt's duration; a retry counted): a context manager."""

    __slots__ = ("span", "token", "t0", "kind")

    def __init__(self, run, seq: int, kind: str, name: str, attempt: int):
        self.kind = kind
        # The workflow's id, name, version and epoch are on the run span, its parent; the step's
        # name is in the span's name. Few attributes: the SDK's cost of a span grows with them.
        attributes = {SEQ: seq, ATTEMPT: attempt} if attempt > 1 else {SEQ: seq}
        span_id = ids.span_id_for(kind, run.workflow_id, seq, run.epoch)
        self.span = _start(f"interlock.{kind} {name}", span_id, None, attributes)
        if attempt > 1:
            metrics.step_retries.add(1, {"kind": kind})

    def __enter__(self):
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        self.t0 = time.monotonic()
        return self

    def __exit__(self, exc_type, exc, tb):
        metrics.step_duration.record(
            time.monotonic() - self.t0, {"kind": self.kind, "outcome": "ok" if exc is None else "error"}
        )
        otel_context.detach(self.token)
        _ended_by(self.span, exc)
        self.span.end()
        return False


class Phase:
    """A child span of the current one (an effect's phase, the effect call itself)."""

    __slots__ = ("span", "token")

    def __init__(self, name: str, span_id: int, attributes: dict):
        self.span = _start(name, span_id, None, attributes)

    def __enter__(self):
        self.token = otel_context.attach(trace.set_span_in_context(self.span))
        return self.span

    def __exit__(self, exc_type, exc, tb):
        otel_context.detach(self.token)
        _ended_by(self.span, exc)
        self.span.end()
        return False


def approval_decided(run, seq: int, request: dict) -> None:
    """Emit the span of approval request ``request`` (its row, decided), from its ask to its
    decision, with a link to each approver's request span whose W3C traceparent the decision
    kept (``approvals[i]["traceparent"]``)."""
    links = []
    for approval in request.get("approvals") or []:
        parent = parse_traceparent(approval.get("traceparent")) if isinstance(approval, dict) else None
        if parent is not None:
            links.append(trace.Link(parent, {"interlock.approval.by": str(approval.get("by"))}))
    attributes = {
        WORKFLOW_ID: run.workflow_id,
        EPOCH: run.epoch,
        SEQ: seq,
        REQUEST_ID: str(request.get("id")),
        APPROVAL_OUTCOME: str(request.get("status")),
    }
    if request.get("grant_id"):
        attributes[GRANT_ID] = str(request["grant_id"])
    span = _start(
        "interlock.approval",
        ids.span_id_for("approval", run.workflow_id, seq),
        None,
        attributes,
        start_time=_ns(request.get("requested_at")),
        links=links,
    )
    span.end(end_time=_ns(request.get("decided_at")))


def current_traceparent() -> str | None:
    """The W3C traceparent of the caller's current span, or None when none is recording."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def parse_traceparent(value) -> SpanContext | None:
    """The SpanContext of a W3C traceparent string ("00-<32 hex>-<16 hex>-<2 hex>"), else None."""
    if not isinstance(value, str):
        return None
    parts = value.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        flags = TraceFlags(int(parts[3], 16))
        ctx = SpanContext(int(parts[1], 16), int(parts[2], 16), is_remote=True, trace_flags=flags)
    except ValueError:
        return None
    return ctx if ctx.is_valid else None


def link_to_workflow(workflow_id: str, trace_context: str | None) -> None:
    """Link the caller's current span (``rt.signal``'s) to ``workflow_id``'s workflow span, in
    the trace its row's ``trace_context`` names (else its lineage's derived trace)."""
    parent = parse_traceparent(trace_context)
    trace_id = parent.trace_id if parent is not None else ids.trace_id_for(workflow_id)
    span_id = ids.span_id_for("workflow", workflow_id)
    trace.get_current_span().add_link(
        SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    )


def caller_span(name: str, workflow_id: str, attributes: dict):
    """A span in the caller's trace (``rt.start``, ``rt.signal``), a child of its current span;
    the caller ends it (a context manager). A start's workflow descends from it (its
    ``trace_context``); a signal links it to the workflow (``link_to_workflow``)."""
    return _tracer.start_as_current_span(name, attributes={WORKFLOW_ID: workflow_id, **attributes})
