"""URLs of the runtime: ``metrics/``, the Prometheus endpoint of the web process
(``path("ilr/", include("ilr.urls"))``; served when ILR_TELEMETRY has ``"prometheus": True``,
a 404 otherwise)."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from django.urls import path

app_name = "ilr"


def metrics(request):
    """The process's metrics in Prometheus's text format (``ilr._telemetry.prometheus``)."""
    from ilr._telemetry import prometheus, setup

    if not setup.prometheus_ready():
        raise Http404("ILR_TELEMETRY does not enable the Prometheus endpoint")
    body, content_type = prometheus.exposition()
    return HttpResponse(body, content_type=content_type)


urlpatterns = [path("metrics/", metrics, name="metrics")]
