"""The effect and journal admins: read-only. An effect's page shows its state, tier, sends,
deadlines, late result and reconciliation, its journal entries and a link to its receipt; the
journal is append-only."""

from __future__ import annotations

from django.contrib import admin
from django.utils.html import format_html

from approvals.admin.common import ReadOnlyAdmin, indexed_search, link, pre, table
from ilr.models import Effect, JournalEntry


@admin.register(Effect)
class EffectAdmin(ReadOnlyAdmin):
    """Effects: state, tier, sends, deadlines, late result, reconciliation, link to the receipt."""

    list_display = (
        "effect_id",
        "workflow_link",
        "target",
        "tier",
        "state",
        "sends",
        "first_dispatched_at",
        "send_deadline",
        "late",
        "reconciled_flag",
        "receipt_link",
    )
    list_filter = ("state", "tier", "target")
    search_fields = ("effect_id",)
    search_help_text = "An effect id (or its start), or a workflow id."
    ordering = ("-first_dispatched_at",)
    fields = (
        "effect_id",
        "workflow_link",
        "receipt_link",
        "target",
        "tier",
        "state",
        "payload_pretty",
        "payload_hash",
        "grant_link",
        "dispatch_workflow_id",
        "dispatch_epoch",
        "first_dispatched_at",
        "send_deadline",
        "settle_margin",
        "settle_by",
        "sends",
        "late_result_pretty",
        "reconciled_pretty",
        "journal_table",
    )
    readonly_fields = fields

    def get_search_results(self, request, queryset, search_term):
        """Exact effect id, effect id prefix, or exact workflow id."""
        return indexed_search(queryset, search_term, ("effect_id", "workflow_id"), "effect_id")

    @admin.display(description="workflow")
    def workflow_link(self, obj):
        """The proposing workflow (by id: no join, so a sleeping-forever workflow never loads)."""
        return link("admin:ilr_workflow_change", obj.workflow_id)

    @admin.display(description="grant")
    def grant_link(self, obj):
        """The grant of the current or last dispatch."""
        return link("admin:ilr_grant_change", obj.grant_id) if obj.grant_id else "—"

    @admin.display(description="receipt")
    def receipt_link(self, obj):
        """The receipt page."""
        return link("approvals:receipt", obj.effect_id, "receipt")

    @admin.display(description="late result", boolean=True)
    def late(self, obj):
        """Whether a late result arrived."""
        return obj.late_result is not None

    @admin.display(description="reconciled", boolean=True)
    def reconciled_flag(self, obj):
        """Whether a person reconciled it (None unless ambiguous)."""
        return (obj.reconciled is not None) if obj.state == "ambiguous" else None

    @admin.display(description="no lookup or resend before")
    def settle_by(self, obj):
        """send_deadline + settle_margin."""
        if obj.send_deadline is None or obj.settle_margin is None:
            return "—"
        return obj.send_deadline + obj.settle_margin

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        """The payload, indented."""
        return pre(obj.payload)

    @admin.display(description="late result")
    def late_result_pretty(self, obj):
        """The late result, indented."""
        return pre(obj.late_result) if obj.late_result is not None else "—"

    @admin.display(description="reconciled")
    def reconciled_pretty(self, obj):
        """The reconciliation, indented."""
        return pre(obj.reconciled) if obj.reconciled is not None else "—"

    @admin.display(description="journal")
    def journal_table(self, obj):
        """The effect's journal entries."""
        rows = [
            [link("admin:ilr_journalentry_change", j.seq), j.kind, j.hash[:16], (j.prev or "(first)")[:16]]
            for j in JournalEntry.objects.filter(effect_id=obj.effect_id).order_by("seq")
        ]
        return table(["seq", "kind", "hash", "prev"], rows)


@admin.register(JournalEntry)
class JournalEntryAdmin(ReadOnlyAdmin):
    """The journal: append-only, read-only here."""

    list_display = ("seq", "effect_link", "kind", "short_hash", "short_prev")
    list_filter = ("kind",)
    search_fields = ("effect_id",)
    search_help_text = "An effect id."
    ordering = ("-seq",)
    fields = ("seq", "effect_link", "kind", "body_pretty", "prev", "hash")
    readonly_fields = fields

    def get_search_results(self, request, queryset, search_term):
        """Exact effect id."""
        return indexed_search(queryset, search_term, ("effect_id",), None)

    @admin.display(description="effect")
    def effect_link(self, obj):
        """The effect."""
        return link("admin:ilr_effect_change", obj.effect_id)

    @admin.display(description="hash")
    def short_hash(self, obj):
        """The first 16 hex digits of the hash."""
        return obj.hash[:16]

    @admin.display(description="prev")
    def short_prev(self, obj):
        """The first 16 hex digits of the previous hash."""
        return (obj.prev or "(first)")[:16]

    @admin.display(description="body")
    def body_pretty(self, obj):
        """The sealed body, verbatim."""
        return format_html("<pre style='white-space:pre-wrap;margin:0'>{}</pre>", obj.body)
