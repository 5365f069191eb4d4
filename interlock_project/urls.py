"""URL configuration: Django admin and the review UI (/review/)."""

import os

from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from django.views.static import serve

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="approvals:queue", permanent=False)),
    path("admin/", admin.site.urls),
    path("review/", include("approvals.urls")),
    path("ilr/", include("ilr.urls")),  # metrics/: the Prometheus endpoint when ILR_TELEMETRY enables it
]

# `manage.py demo --serve` runs gunicorn, which serves no static files: it collects them into
# STATIC_ROOT and sets ILR_SERVE_STATIC=1 so the admin's CSS is served from there. Off otherwise.
if os.environ.get("ILR_SERVE_STATIC") == "1":
    urlpatterns.append(re_path(r"^static/(?P<path>.*)$", serve, {"document_root": settings.STATIC_ROOT}))
