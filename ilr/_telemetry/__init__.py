"""Telemetry: OpenTelemetry spans and metrics, the Prometheus endpoint, and the operations figures."""
