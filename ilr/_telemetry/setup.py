"""ILR_TELEMETRY: whether the engine emits telemetry, and the SDK it may install (docs/guides/telemetry.md).

``ILR_TELEMETRY`` is None (the default) or a dict of these keys, each optional:

- ``enabled``: True or False; default (None) on exactly when the process already has an
  OpenTelemetry SDK tracer or meter provider of its own, or one of the keys below installs one.
- ``sdk``: True installs the OpenTelemetry SDK's tracer and meter providers in this process (the
  ``telemetry`` extra), unless the project installed its own: spans get ilr's deterministic ids
  (``ilr._telemetry.ids.IdGenerator``). Implied by each key below.
- ``spans_file``: a path; every finished span is appended to it as one JSON line (the SDK's
  ``ReadableSpan.to_json``), written before the span's end returns.
- ``spans_memory``: True keeps finished spans in an InMemorySpanExporter behind a BatchSpanProcessor
  (``memory_spans()``).
- ``metrics_memory``: True reads the metrics into an InMemoryMetricReader (``memory_metrics()``).
- ``prometheus``: True serves the metrics in Prometheus's text format: ``ilr.urls``' ``metrics/``
  view, and ``ilr_worker --metrics-port`` (which sets it).
- ``service_name``: the ``service.name`` resource of the installed providers; default "interlock".
- ``state_gauges``: True registers the state gauges (``ilr._telemetry.gauges``: pending approvals,
  ambiguous effects, due work, unserved versions...) on the global meter provider, from the app's
  ready() (``ilr.apps``); they read the database, so turn it on in one process per deployment
  (docs/guides/operations-page.md).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from ilr._telemetry import hooks
from ilr._telemetry.options import SDK_KEYS, telemetry_problems

log = logging.getLogger("ilr.telemetry")

_state: dict[str, Any] = {}
_lock = threading.Lock()


def _has_sdk_provider() -> bool:
    """Whether a real (SDK) provider is installed globally, by anyone."""
    from opentelemetry import metrics, trace

    tracer = type(trace.get_tracer_provider()).__name__
    meter = type(metrics.get_meter_provider()).__name__
    return tracer not in ("ProxyTracerProvider", "NoOpTracerProvider") or meter not in (
        "_ProxyMeterProvider",
        "NoOpMeterProvider",
    )


def configure(options: dict | None = None, **overrides: Any) -> bool:
    """Apply ILR_TELEMETRY (or ``options``), with ``overrides`` on top, to this process: install
    the SDK providers it asks for (once per process) and set ``hooks.on``. Idempotent.

    Returns:
        whether the engine now emits telemetry.

    Raises:
        InvalidInput: the setting's shape (field "ILR_TELEMETRY"), or an SDK key without the
            ``telemetry`` extra installed.
    """
    from ilr._errors import InvalidInput

    if options is None:
        from ilr._conf import settings

        options = settings.TELEMETRY
    # The setting's own shape first: a non-dict (True, "on") cannot be merged with the overrides.
    problems = telemetry_problems(options)
    if not problems:
        options = {**(options or {}), **{k: v for k, v in overrides.items() if v is not None}}
        problems = telemetry_problems(options)
    if problems:
        raise InvalidInput("ILR_TELEMETRY", "; ".join(f"{where}: {rule}" for where, rule in problems))
    wants_sdk = any(options.get(k) for k in SDK_KEYS)
    with _lock:
        if wants_sdk:
            _install(options)
        enabled = options.get("enabled")
        hooks.on = bool(enabled) if enabled is not None else (wants_sdk or _has_sdk_provider())
        if hooks.on:
            from ilr._telemetry import tracing

            tracing.bind_tracer()
    return hooks.on


def _install(options: dict) -> None:
    try:
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter, MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    except ImportError as exc:
        from ilr._errors import InvalidInput

        raise InvalidInput(
            "ILR_TELEMETRY", f"needs the OpenTelemetry SDK: pip install 'interlock[telemetry]' ({exc})"
        ) from None
    from ilr._telemetry.ids import IdGenerator

    resource = Resource.create({"service.name": options.get("service_name") or "interlock"})
    if "tracer" not in _state:
        if type(trace.get_tracer_provider()).__name__ == "ProxyTracerProvider":
            provider = TracerProvider(id_generator=IdGenerator(), resource=resource)  # type: ignore[arg-type]
            trace.set_tracer_provider(provider)
            _state["tracer"] = provider
        else:
            log.info("ILR_TELEMETRY: the process has a tracer provider already; ilr uses it")
            _state["tracer"] = trace.get_tracer_provider()
    tracer = _state["tracer"]
    if options.get("spans_file") and "spans_file" not in _state and hasattr(tracer, "add_span_processor"):
        try:
            exporter = _json_lines_exporter(options["spans_file"])
        except OSError as exc:  # the check found it writable; it changed since
            from ilr._errors import InvalidInput

            raise InvalidInput("ILR_TELEMETRY['spans_file']", f"cannot be opened to append spans: {exc}") from None
        _state["spans_file"] = options["spans_file"]
        tracer.add_span_processor(SimpleSpanProcessor(exporter))
    if options.get("spans_memory") and "spans_memory" not in _state and hasattr(tracer, "add_span_processor"):
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        # Batched, as a production exporter is (OTLP behind a BatchSpanProcessor): the span's end
        # only queues it. A queue that drops nothing: these spans are counted (memory_spans()).
        _state["spans_memory"] = InMemorySpanExporter()
        tracer.add_span_processor(BatchSpanProcessor(_state["spans_memory"], max_queue_size=10_000_000))
    if "meter" not in _state:
        # A MeterProvider takes its readers when it is made: every reader any key asks for now.
        readers = []
        if options.get("prometheus"):
            from opentelemetry.exporter.prometheus import PrometheusMetricReader

            _state["prometheus"] = PrometheusMetricReader()
            readers.append(_state["prometheus"])
        if options.get("metrics_memory"):
            from opentelemetry.sdk.metrics.export import InMemoryMetricReader

            _state["metrics_memory"] = InMemoryMetricReader()
            readers.append(_state["metrics_memory"])
        if type(metrics.get_meter_provider()).__name__ == "_ProxyMeterProvider":
            # No exemplars: the Prometheus text format of this exporter carries none, and each
            # measurement inside a span would pay to sample one.
            _state["meter"] = MeterProvider(
                metric_readers=readers, resource=resource, exemplar_filter=AlwaysOffExemplarFilter()
            )
            metrics.set_meter_provider(_state["meter"])
        else:
            log.info("ILR_TELEMETRY: the process has a meter provider already; ilr records on it")
            _state["meter"] = metrics.get_meter_provider()
    elif options.get("prometheus") and "prometheus" not in _state:
        # The provider was made earlier (the app's ready() for another SDK key, before
        # ilr_worker --metrics-port asked for this reader): an SDK provider takes a reader later.
        if hasattr(_state["meter"], "add_metric_reader"):
            from opentelemetry.exporter.prometheus import PrometheusMetricReader

            reader = PrometheusMetricReader()
            _state["meter"].add_metric_reader(reader)
            _state["prometheus"] = reader
        else:
            log.warning("ILR_TELEMETRY: the meter provider takes no more readers; no metrics to serve")


def prometheus_ready() -> bool:
    """Whether this process's meter provider has the Prometheus reader (``configure(prometheus=True)``)."""
    return "prometheus" in _state


def memory_spans():
    """The InMemorySpanExporter of ``spans_memory`` (every span ended so far exported to it
    first), or None."""
    exporter = _state.get("spans_memory")
    if exporter is not None:
        _state["tracer"].force_flush()
    return exporter


def memory_metrics():
    """The InMemoryMetricReader of ``metrics_memory``, or None."""
    return _state.get("metrics_memory")


def _json_lines_exporter(path: str):
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class JsonLinesSpanExporter(SpanExporter):
        """Appends each finished span to ``path`` as one JSON line, flushed before export returns."""

        def __init__(self):
            self._lock = threading.Lock()
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the process's life

        def export(self, spans):
            lines = "".join(span.to_json(indent=None) + "\n" for span in spans)
            with self._lock:
                self._file.write(lines)
                self._file.flush()
            return SpanExportResult.SUCCESS

        def shutdown(self):
            with self._lock:
                self._file.close()

    return JsonLinesSpanExporter()
