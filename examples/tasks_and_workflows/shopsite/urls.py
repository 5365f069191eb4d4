"""URLs: the Django admin (tasks and workflows under "Interlock runtime") and the review UI."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("review/", include("approvals.urls")),
]
