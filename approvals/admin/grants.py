"""The grant admin and the approval request admin.

Grants: create a policy grant (``grant_in``, through ``services.grant_create``); revoke
(``approvals.admin.actions.GrantActions``); otherwise read-only. Approval requests are read-only
here: approve or reject them in the review UI.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils.html import format_html

from approvals import services
from approvals.admin.actions import GrantActions
from approvals.admin.common import ReadOnlyAdmin, indexed_search, link, pre, table
from approvals.admin.filters import GrantKindFilter, GrantStateFilter
from approvals.display import money
from approvals.forms import GrantCreateForm
from approvals.templatetags.approvals_extras import cents, reveal_html
from ilr import InvalidInput, get_target
from ilr.models import ApprovalRequest, Effect, Grant


@admin.register(Grant)
class GrantAdmin(GrantActions, admin.ModelAdmin):
    """Grants: create a policy grant (``grant_in``); revoke with a confirmation page that then
    lists the effect ids revoke returned. Grants are otherwise read-only."""

    list_display = (
        "id",
        "principal",
        "action",
        "cap",
        "kind",
        "granted_by",
        "created_at",
        "expires_at",
        "revoked_at",
        "revoked_by",
    )
    list_filter = (GrantStateFilter, GrantKindFilter, "action")
    search_fields = ("id", "principal", "granted_by", "revoked_by")
    search_help_text = "A grant id (or its start), a principal, or a person who granted or revoked."
    ordering = ("-created_at",)
    list_per_page = 50
    show_full_result_count = False
    actions = ["revoke_selected"]
    change_form_template = "admin/approvals/grant_change_form.html"
    detail_fields = (
        "id",
        "principal",
        "action",
        "cap",
        "kind",
        "payload_hash",
        "facts_pretty",
        "granted_by",
        "created_at",
        "expires_at",
        "revoked_at",
        "revoked_by",
        "effects_table",
    )

    def has_add_permission(self, request):
        """approvals.grant: create a policy grant."""
        return request.user.has_perm("approvals.grant")

    def has_change_permission(self, request, obj=None):
        """Grants are never edited: revoke is the only change, and it is an action."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Grants are never deleted (receipts refer to them)."""
        return False

    def get_search_results(self, request, queryset, search_term):
        """Exact id, principal or person, or an id prefix."""
        return indexed_search(queryset, search_term, ("id", "principal", "granted_by", "revoked_by"), "id")

    def get_fields(self, request, obj=None):
        """The create form's fields, or every detail field."""
        if obj is None:
            return ["principal", "action", "max_cents", "expires_in_hours"]
        return list(self.detail_fields)

    def get_readonly_fields(self, request, obj=None):
        """Nothing on the create form; everything on a grant's page."""
        return () if obj is None else self.detail_fields

    def get_form(self, request, obj=None, change=False, **kwargs):
        """GrantCreateForm for a new grant (no granted_by field: it is the logged-in user)."""
        if obj is None:
            kwargs["form"] = GrantCreateForm
        return super().get_form(request, obj, change=change, **kwargs)

    def save_model(self, request, obj, form, change):
        """Create the grant through ``services.grant_create`` (``grant_in`` + LogEntry)."""
        if change:
            raise PermissionDenied
        try:
            obj.id = services.grant_create(
                user=request.user,
                principal=form.cleaned_data["principal"],
                action=form.cleaned_data["action"],
                max_cents=form.cleaned_data.get("max_cents"),
                expires_in=form.expires_in_seconds(),
            )
        except InvalidInput as exc:
            raise PermissionDenied(str(exc)) from exc

    def save_related(self, request, form, formsets, change):
        """Grants have no related objects to save."""

    def log_addition(self, request, obj, message):
        """No-op: ``services.grant_create`` wrote the LogEntry in the grant's own transaction."""

    @admin.display(description="cap")
    def cap(self, obj):
        """max_cents in dollars, or 'no cap'."""
        return "no cap" if obj.max_cents is None else cents(obj.max_cents)

    @admin.display(description="kind")
    def kind(self, obj):
        """Approval of one payload, or a policy grant."""
        return "approval" if obj.payload_hash else "policy"

    @admin.display(description="facts seen")
    def facts_pretty(self, obj):
        """The premises the approval authorized."""
        return pre(obj.facts_seen) if obj.facts_seen is not None else "—"

    @admin.display(description="effects under this grant")
    def effects_table(self, obj):
        """Effects dispatched under this grant."""
        rows = [
            [
                link("admin:ilr_effect_change", e.effect_id),
                e.state,
                e.sends,
                link("approvals:receipt", e.effect_id, "receipt"),
            ]
            for e in Effect.objects.filter(grant_id=obj.id).order_by("effect_id")
        ]
        return table(["effect", "state", "sends", ""], rows)


# -- approval requests ---------------------------------------------------------------------------


@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    """Approval requests of every workflow (``ctx.request_approval``): read-only here; approve
    or reject in the review UI, which runs ``approve_request_in`` / ``reject_request_in``."""

    list_display = (
        "id",
        "summary_display",
        "workflow_id",
        "target",
        "action",
        "status",
        "approvers_display",
        "requested_at",
        "expires_at",
        "review_link",
    )
    list_filter = ("status", "action")
    search_fields = ("id", "workflow_id")
    ordering = ("-requested_at",)
    # The untrusted text (written by the workflow, perhaps by a model) is shown only through
    # reveal_html, so a bidirectional override or a zero-width space cannot pass for plain text.
    exclude = ("summary", "payload", "premises", "decision", "approvals")
    readonly_fields = (
        "summary_display",
        "amount_display",
        "payload_display",
        "premises_display",
        "decision_display",
        "approvals_display",
    )

    def get_search_results(self, request, queryset, search_term):
        """Exact request id or workflow id."""
        return indexed_search(queryset, search_term, ("id", "workflow_id"), None)

    @admin.display(description="approvers")
    def approvers_display(self, obj):
        """Who approved so far, and how many the request needs."""
        names = [a.get("by") for a in obj.approvals or []]
        return f"{', '.join(names) or '—'} ({len(names)} of {obj.approvals_needed})"

    @admin.display(description="review")
    def review_link(self, obj):
        """The request on its case page in the review UI (approve or reject there)."""
        return format_html(
            '<a href="{}#request-{}">case page</a>', reverse("approvals:case", args=[obj.workflow_id]), obj.id
        )

    @admin.display(description="amount the rules check")
    def amount_display(self, obj):
        """The amount the two-person rule and the grant's cap read (``amount_cents``, from the
        target's ``amount_field``), as the review UI's Approve button shows it."""
        shown = money(obj.amount_cents, getattr(get_target(obj.target), "currency", "USD"))
        return shown or "— (no amount)"

    @admin.display(description="summary")
    def summary_display(self, obj):
        """The request's summary, characters that are not plain text shown as code points."""
        return reveal_html(obj.summary)

    @admin.display(description="payload")
    def payload_display(self, obj):
        return pre(obj.payload)

    @admin.display(description="decision")
    def decision_display(self, obj):
        return pre(obj.decision)

    @admin.display(description="premises")
    def premises_display(self, obj):
        return pre(obj.premises)

    @admin.display(description="approvals")
    def approvals_display(self, obj):
        return pre(obj.approvals)
