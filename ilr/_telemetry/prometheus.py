"""The Prometheus endpoint, for teams without an OpenTelemetry collector (docs/guides/telemetry.md).

The metrics of this process's meter provider (the runtime's event metrics and every other
instrument on it, the state gauges included), read by OpenTelemetry's Prometheus exporter into
prometheus_client's registry and served in Prometheus's text format: by ``ilr_worker
--metrics-port`` (an HTTP server thread, like Temporal's Prometheus bind address) or by the
``metrics/`` view of ``ilr.urls`` in the web process.
"""

from __future__ import annotations

from ilr._errors import InvalidInput
from ilr._telemetry import setup


def serve(port: int, addr: str = "127.0.0.1"):
    """Serve /metrics on ``addr:port`` from a daemon thread, installing the Prometheus reader
    (``setup.configure(prometheus=True)``) first.

    Returns:
        (the HTTP server, its thread), as prometheus_client's start_http_server returns them.

    Raises:
        InvalidInput: a port outside 1..65535 (field "metrics_port"), or no telemetry extra.
        OSError: the address is taken.
    """
    if type(port) is not int or not 0 < port < 65536:
        raise InvalidInput("metrics_port", f"must be a TCP port, 1 to 65535, got {port!r}")
    setup.configure(prometheus=True)
    if not setup.prometheus_ready():
        raise InvalidInput("metrics_port", "this process's meter provider was made without the Prometheus reader")
    from prometheus_client import start_http_server

    return start_http_server(port, addr=addr)


def exposition() -> tuple[bytes, str]:
    """The current metrics in Prometheus's text format: (body, content type)."""
    from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
