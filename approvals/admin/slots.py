"""The slots admin: every holder and waiter of a concurrency key, live and released, read-only
(the runtime writes them; docs/protocol.md §5.4)."""

from __future__ import annotations

from django.contrib import admin

from approvals import selectors
from approvals.admin.common import ReadOnlyAdmin, indexed_search, link
from ilr.models import Slot


class LiveFilter(admin.SimpleListFilter):
    """Live rows (holding or queued) or released ones."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        """Holding, queued, released."""
        return [("holding", "holding"), ("queued", "queued"), ("released", "released")]

    def queryset(self, request, queryset):
        """The rows in the chosen state."""
        if self.value() == "holding":
            return queryset.filter(released_at__isnull=True, slot_no__isnull=False)
        if self.value() == "queued":
            return queryset.filter(released_at__isnull=True, slot_no__isnull=True)
        if self.value() == "released":
            return queryset.filter(released_at__isnull=False)
        return queryset


@admin.register(Slot)
class SlotAdmin(ReadOnlyAdmin):
    """Concurrency keys: who holds each key's slots, who waits and since when, and the history
    of released slots. Search by exact key or workflow id."""

    list_display = (
        "key",
        "workflow_link",
        "state",
        "slot_limit",
        "priority",
        "queued_at",
        "acquired_at",
        "released_at",
        "released_why",
    )
    list_filter = (LiveFilter,)
    search_fields = ("key",)
    search_help_text = "A concurrency key or a workflow id (exact)."
    ordering = ("-id",)
    show_facets = admin.ShowFacets.NEVER
    fields = list_display
    readonly_fields = fields
    change_list_template = "admin/approvals/slot_change_list.html"

    def changelist_view(self, request, extra_context=None):
        """The list, under each queue's rule and state (``rt.queues()``)."""
        return super().changelist_view(request, {"queues": selectors.queues(), **(extra_context or {})})

    def get_search_results(self, request, queryset, search_term):
        """Exact key or workflow id (slots_key and slots_workflow serve them)."""
        return indexed_search(queryset, search_term, ("key", "workflow_id"), None)

    @admin.display(description="workflow")
    def workflow_link(self, obj):
        """The workflow (by id)."""
        return link("admin:ilr_workflow_change", obj.workflow_id)

    @admin.display(description="state")
    def state(self, obj):
        """holding slot n, queued, put off by its key's rate until its turn, or released."""
        if obj.released_at is not None:
            return "released"
        if obj.slot_no is not None:
            return f"holding slot {obj.slot_no}"
        return f"put off until {obj.deferred_until:%Y-%m-%d %H:%M:%S}" if obj.deferred_until else "queued"
