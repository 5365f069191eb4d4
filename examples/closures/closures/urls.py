"""URLs: the Django admin and Interlock's review UI at /review/."""

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="approvals:queue", permanent=False)),
    path("admin/", admin.site.urls),
    path("review/", include("approvals.urls")),
]
