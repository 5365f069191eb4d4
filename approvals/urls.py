"""URLs of the review UI, mounted at /review/."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from approvals import views

app_name = "approvals"

urlpatterns = [
    path("", views.queue, name="queue"),
    path(
        "login/",
        auth_views.LoginView.as_view(
            template_name="approvals/login.html", redirect_authenticated_user=True, next_page="approvals:queue"
        ),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(next_page="approvals:login"), name="logout"),
    path("ambiguous/", views.ambiguous, name="ambiguous"),
    path("effects/<str:effect_id>/reconcile/", views.reconcile, name="reconcile"),
    path("receipts/<str:effect_id>/", views.receipt, name="receipt"),
    path("receipts/<str:effect_id>/bundle.json", views.receipt_json, name="receipt_json"),
    path("requests/<str:request_id>/approve/", views.approve, name="approve"),
    path("requests/<str:request_id>/reject/", views.reject, name="reject"),
    path("cases/", views.cases, name="cases"),
    # Workflow ids may hold slashes.
    path("cases/<path:workflow_id>/", views.case, name="case"),
]
