"""The signal, model call and response admins: read-only (the runtime writes them)."""

from __future__ import annotations

from django.contrib import admin

from approvals.admin.common import ReadOnlyAdmin, indexed_search, link, pre
from approvals.admin.filters import ConsumedFilter
from ilr.models import LlmCall, Response, Signal


@admin.register(Signal)
class SignalAdmin(ReadOnlyAdmin):
    """Signals: read-only (sent through the runtime, consumed by workflows)."""

    list_display = ("id", "workflow_link", "name", "sender", "consumed_seq", "created_at")
    list_filter = ("name", ConsumedFilter)
    search_fields = ("workflow_id",)
    search_help_text = "A workflow id."
    ordering = ("-id",)
    fields = ("id", "workflow_link", "name", "sender", "consumed_seq", "created_at", "payload_pretty")
    readonly_fields = fields

    def get_search_results(self, request, queryset, search_term):
        """Exact workflow id."""
        return indexed_search(queryset, search_term, ("workflow_id",), None)

    @admin.display(description="workflow")
    def workflow_link(self, obj):
        """The workflow (by id)."""
        return link("admin:ilr_workflow_change", obj.workflow_id)

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        """The payload, indented."""
        return pre(obj.payload)


@admin.register(LlmCall)
class LlmCallAdmin(ReadOnlyAdmin):
    """Model calls, written before each call (discarded calls are counted from these)."""

    list_display = ("id", "workflow_id", "seq", "epoch", "request_hash", "started_at")
    search_fields = ("workflow_id",)
    ordering = ("-id",)

    def get_search_results(self, request, queryset, search_term):
        """Exact workflow id."""
        return indexed_search(queryset, search_term, ("workflow_id",), None)


@admin.register(Response)
class ResponseAdmin(ReadOnlyAdmin):
    """The sender's response log: every target response, appended before T_commit."""

    list_display = ("id", "effect_id", "workflow_id", "epoch", "received_at")
    search_fields = ("effect_id",)
    ordering = ("-id",)

    def get_search_results(self, request, queryset, search_term):
        """Exact effect id or workflow id."""
        return indexed_search(queryset, search_term, ("effect_id", "workflow_id"), None)
