"""Django admin over every ilr table, and the approvals app's own table.

The ilr tables are the runtime's: nothing here writes them through the ORM. Append-only and
runtime-owned tables are read-only (no add, change or delete); the few writes an operator may
make are admin actions with a confirmation page (a ``get_urls`` view wrapped in
``admin_site.admin_view``), each a call into ``approvals.services`` (the runtime's transaction
body plus a LogEntry, in one transaction):

- grants: create a policy grant (``grant_in``); revoke (``revoke_in``), after which the page lists
  the effect ids revoke returned: "these may still land";
- workflows: cancel (``cancel_in``); resume stuck workflows (``resume_in``); deployments: retire a
  version, with its drain report.

The workflow list and the deployments page say when work is due and no live worker serves its
(name, version) ("due, no live worker serves refund@v1"; ``rt.unserved()``).

Tables with a composite primary key (deployments, steps, claims) cannot be registered in
Django 5.2's admin; steps and claims are shown in the workflow page (step timeline, claim
history) and deployments on their own admin page (linked from the workflow list).

Every list is paginated without a full count and filters only on indexed or small columns, so
pages stay fast with tens of thousands of workflows. Workflow rows defer ``available_at`` (a
sleeping-forever workflow holds 'infinity', which no Python datetime holds) and show it as text.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from approvals import selectors, services
from approvals.cases import OUTCOMES, with_outcome
from approvals.forms import GrantCreateForm
from approvals.templatetags.approvals_extras import as_json, cents, pretty_json
from ilr.codec import MAX_TEXT_LENGTH
from ilr.errors import InvalidInput
from ilr.grants import GrantNotFound
from ilr.models import (
    ApprovalRequest,
    Deployment,
    Effect,
    Grant,
    JournalEntry,
    LlmCall,
    Response,
    Signal,
    Step,
    Workflow,
)

MAX_SELECTED = 500


def _pre(value) -> str:
    return format_html("<pre style='white-space:pre-wrap;margin:0'>{}</pre>", pretty_json(value))


def _table(headers: list[str], rows: list[list]) -> str:
    if not rows:
        return format_html("<span style='color:#666'>{}</span>", "none")
    head = format_html_join("", "<th>{}</th>", ((h,) for h in headers))
    body = mark_safe("".join(
        "<tr>" + "".join(format_html("<td>{}</td>", c) for c in row) + "</tr>" for row in rows))
    return format_html("<table><thead><tr>{}</tr></thead><tbody>{}</tbody></table>", head, body)


def _link(viewname: str, arg, text=None) -> str:
    return format_html('<a href="{}">{}</a>', reverse(viewname, args=[arg]), text if text is not None else arg)


def _indexed_search(queryset, term: str, exact_fields: tuple[str, ...], prefix_field: str | None):
    """Search by exact value (and a case-sensitive prefix of one field), which btree indexes serve,
    instead of admin's default icontains scans."""
    term = term.strip()
    if not term:
        return queryset, False
    q = Q()
    for f in exact_fields:
        q |= Q(**{f: term})
    if prefix_field:
        q |= Q(**{f"{prefix_field}__startswith": term})
    return queryset.filter(q), False


class ReadOnlyAdmin(admin.ModelAdmin):
    """A view-only admin for runtime-owned tables: no add, change or delete, ever."""

    list_per_page = 50
    show_full_result_count = False

    def has_add_permission(self, request):
        """Runtime-owned rows are never added from the admin."""
        return False

    def has_change_permission(self, request, obj=None):
        """Runtime-owned rows are never changed from the admin."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Runtime-owned rows are never deleted from the admin."""
        return False


# -- workflows -----------------------------------------------------------------------------------

class DeploymentNameFilter(admin.SimpleListFilter):
    """Filter workflows by name; the choices come from the small deployments table."""

    title = "name"
    parameter_name = "name"

    def lookups(self, request, model_admin):
        """Every deployed workflow name."""
        names = Deployment.objects.order_by("name").values_list("name", flat=True).distinct()
        return [(n, n) for n in names]

    def queryset(self, request, queryset):
        """Workflows of the chosen name."""
        return queryset.filter(name=self.value()) if self.value() else queryset


class DeploymentVersionFilter(admin.SimpleListFilter):
    """Filter workflows by version (of the chosen name, when one is chosen)."""

    title = "version"
    parameter_name = "version"

    def lookups(self, request, model_admin):
        """Every deployed version, narrowed to the chosen name."""
        qs = Deployment.objects.order_by("name", "-created_at")
        if request.GET.get("name"):
            qs = qs.filter(name=request.GET["name"])
        return [(d.version, f"{d.version}{' (retired)' if d.retired_at else ''}") for d in qs]

    def queryset(self, request, queryset):
        """Workflows of the chosen version."""
        return queryset.filter(version=self.value()) if self.value() else queryset


class OutcomeFilter(admin.SimpleListFilter):
    """Filter workflows by outcome (waiting for approval, refused, ambiguous, failed, stuck), as
    the review UI's case list does (``approvals.cases.OUTCOMES``)."""

    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request, model_admin):
        """Every outcome, in words."""
        return [(name, o.label) for name, o in OUTCOMES.items()]

    def queryset(self, request, queryset):
        """Workflows in the chosen outcome (an unknown one: all of them, as Django does)."""
        return with_outcome(queryset, self.value()) if self.value() in OUTCOMES else queryset


@admin.register(Workflow)
class WorkflowAdmin(ReadOnlyAdmin):
    """Workflows: filters by outcome, status, name and version; search by id; the detail page shows the
    step timeline, waiting state, effects, signals, children and claim history. The list names
    every (name, version) with due work and no live worker, above it and on each such row."""

    list_display = ("id", "name", "version", "status", "served", "waiting_on", "available", "created_at",
                    "updated_at")
    list_filter = (OutcomeFilter, "status", DeploymentNameFilter, DeploymentVersionFilter)
    search_fields = ("id",)
    search_help_text = "A workflow id, or the start of one."
    ordering = ("-created_at",)
    show_facets = admin.ShowFacets.NEVER  # per-filter counts would scan every workflow
    actions = ["cancel_selected", "resume_selected"]
    change_list_template = "admin/approvals/workflow_change_list.html"
    fieldsets = [
        (None, {"fields": ("id", "name", "version", "status", "review_link", "waiting_state", "last_error",
                           "available",
                           "cancel_requested_at", "cancel_requested_by", "result_pretty", "error_pretty",
                           "input_pretty")}),
        ("Lease", {"fields": ("epoch", "owner", "lease_expires_at", "takeovers", "resumed_by", "resumed_at")}),
        ("Lineage", {"fields": ("parent_link", "children_table", "continued_from", "forked_from", "created_at",
                                "updated_at")}),
        ("Step timeline", {"fields": ("timeline",)}),
        ("Effects", {"fields": ("effects_table",)}),
        ("Signals", {"fields": ("signals_table",)}),
        ("Claims", {"fields": ("claims_table",), "classes": ("collapse",)}),
    ]
    readonly_fields = [f for _, opts in fieldsets for f in opts["fields"]]

    def get_queryset(self, request):
        """Workflows with ``available_at`` deferred and read as text (it may be 'infinity'),
        annotated with ``unserved`` (``selectors.with_unserved``)."""
        return selectors.with_unserved(selectors.workflows())

    def changelist_view(self, request, extra_context=None):
        """The list, with the (name, version) pairs that have due work and no live worker."""
        return super().changelist_view(request, {"unserved": selectors.unserved(), **(extra_context or {})})

    @admin.display(description="served")
    def served(self, obj):
        """"due, no live worker serves name@version" for a due workflow that nothing can claim."""
        if getattr(obj, "unserved", False):
            return format_html("<strong style='color:#ba2121'>due, no live worker serves {}@{}</strong>",
                               obj.name, obj.version)
        return "—"

    def get_search_results(self, request, queryset, search_term):
        """Search by exact id or id prefix (the primary key index serves both)."""
        return _indexed_search(queryset, search_term, ("id",), "id")

    @admin.display(description="available at")
    def available(self, obj):
        """``available_at`` as text: 'never by itself' for 'infinity'."""
        text = getattr(obj, "available_at_text", None)
        return "never by itself (waits for a signal)" if text == "infinity" else text

    @admin.display(description="waiting on")
    def waiting_on(self, obj):
        """What a sleeping workflow waits for, in a few words."""
        w = obj.waiting or {}
        if not w:
            return "—"
        if w.get("kind") == "signal":
            return f"signal {w.get('signal')}"
        if w.get("kind") == "effect" and w.get("lookup_error"):
            # The effect could not read its target (effects.LOOKUP_RETRY): say so in the list.
            return f"effect lookup, attempt {w.get('lookup_attempt')} failed: {str(w['lookup_error'])[:80]}"
        if w.get("kind") == "retry" and w.get("last_error"):
            # A step or decision that failed and waits to retry (WorkflowContext._failed_attempt).
            e = w["last_error"]
            return f"retry {w.get('name')}, attempt {e.get('attempt')} failed: {e.get('type')}: " \
                   f"{str(e.get('message'))[:80]}"
        return w.get("kind") or as_json(w)

    @admin.display(description="waiting")
    def waiting_state(self, obj):
        """The full waiting state."""
        return _pre(obj.waiting) if obj.waiting else "—"

    @admin.display(description="last failed attempt")
    def last_error(self, obj):
        """A step waiting to retry: the exception type, message, attempt number and time of its
        last failed attempt (``waiting["last_error"]``)."""
        e = (obj.waiting or {}).get("last_error")
        if not e:
            return "—"
        return format_html("<strong>{}: </strong><pre style='white-space:pre-wrap;margin:0'>{}</pre>"
                           "attempt {} of step {}, at {}; retry {} at {}", e.get("type"), e.get("message"),
                           e.get("attempt"), obj.waiting.get("name"), e.get("at"), obj.waiting.get("attempt"),
                           obj.waiting.get("until"))

    @admin.display(description="review")
    def review_link(self, obj):
        """The workflow's page in the review UI."""
        return _link("approvals:case", obj.id, "open in the review UI")

    @admin.display(description="result")
    def result_pretty(self, obj):
        """The result, indented."""
        return _pre(obj.result) if obj.result is not None else "—"

    @admin.display(description="error")
    def error_pretty(self, obj):
        """The error, indented."""
        return _pre(obj.error) if obj.error is not None else "—"

    @admin.display(description="input")
    def input_pretty(self, obj):
        """The input, indented."""
        return _pre(obj.input)

    @admin.display(description="parent")
    def parent_link(self, obj):
        """The parent workflow."""
        return _link("admin:ilr_workflow_change", obj.parent_id) if obj.parent_id else "—"

    @admin.display(description="children")
    def children_table(self, obj):
        """Child workflows."""
        rows = Workflow.objects.filter(parent_id=obj.id).order_by("created_at").values("id", "name", "status")
        return _table(["child", "name", "status"],
                      [[_link("admin:ilr_workflow_change", r["id"]), r["name"], r["status"]] for r in rows])

    @admin.display(description="steps")
    def timeline(self, obj):
        """The step timeline: seq, kind, name, time, epoch, output or error."""
        from ilr.models import Step

        rows = []
        for s in Step.objects.filter(workflow_id=obj.id).order_by("seq"):
            out = s.error if s.error is not None else s.output
            text = as_json(out)
            rows.append([s.seq, s.kind, s.name, f"{s.created_at:%Y-%m-%d %H:%M:%S.%f}"[:-3], s.epoch,
                         ("ERROR " if s.error is not None else "") + (text[:200] + "…" if len(text) > 200 else text)])
        return _table(["#", "kind", "name", "at (UTC)", "epoch", "output"], rows)

    @admin.display(description="effects")
    def effects_table(self, obj):
        """The workflow's effects, each with its receipt."""
        rows = [[_link("admin:ilr_effect_change", e.effect_id), e.state, e.tier, e.sends, as_json(e.payload),
                 _link("approvals:receipt", e.effect_id, "receipt")]
                for e in Effect.objects.filter(workflow_id=obj.id).order_by("effect_id")]
        return _table(["effect", "state", "tier", "sends", "payload", ""], rows)

    @admin.display(description="signals")
    def signals_table(self, obj):
        """The workflow's signals and whether they were consumed."""
        rows = [[_link("admin:ilr_signal_change", s.id), s.name, s.sender or "—", s.consumed_seq
                 if s.consumed_seq is not None else "not yet", as_json(s.payload)[:200]]
                for s in Signal.objects.filter(workflow_id=obj.id).order_by("id")]
        return _table(["#", "name", "sender", "consumed at step", "payload"], rows)

    @admin.display(description="claims")
    def claims_table(self, obj):
        """Claim history: every epoch, its owner and lease."""
        from ilr.models import Claim

        rows = [[c.epoch, c.owner, c.version, f"{c.claimed_at:%H:%M:%S.%f}"[:-3], f"{c.lease_expires_at:%H:%M:%S}",
                 c.prev_status] for c in Claim.objects.filter(workflow_id=obj.id).order_by("epoch")]
        return _table(["epoch", "owner", "version", "claimed at", "lease until", "previous status"], rows)

    # -- cancel ---------------------------------------------------------------------------------

    def has_cancel_permission(self, request):
        """approvals.cancel."""
        return request.user.has_perm("approvals.cancel")

    def has_resume_permission(self, request):
        """approvals.resume."""
        return request.user.has_perm("approvals.resume")

    def has_retire_permission(self, request):
        """approvals.retire."""
        return request.user.has_perm("approvals.retire")

    @admin.action(permissions=["cancel"], description="Cancel selected workflows…")
    def cancel_selected(self, request, queryset):
        """Go to the cancel confirmation page for the selected workflows."""
        ids = list(queryset.values_list("id", flat=True)[:MAX_SELECTED])
        return HttpResponseRedirect(reverse("admin:ilr_workflow_cancel") + "?" + urlencode([("ids", i) for i in ids]))

    @admin.action(permissions=["resume"], description="Resume stuck workflows…")
    def resume_selected(self, request, queryset):
        """Go to the resume confirmation page for the selected workflows."""
        ids = list(queryset.values_list("id", flat=True)[:MAX_SELECTED])
        return HttpResponseRedirect(reverse("admin:ilr_workflow_resume") + "?" + urlencode([("ids", i) for i in ids]))

    def get_urls(self):
        """The confirmation pages (cancel, resume, retire) and the deployments page, before the defaults."""
        wrap = self.admin_site.admin_view
        return [
            path("cancel/", wrap(self.cancel_view), name="ilr_workflow_cancel"),
            path("resume/", wrap(self.resume_view), name="ilr_workflow_resume"),
            path("deployments/", wrap(self.deployments_view), name="ilr_deployments"),
            path("deployments/retire/", wrap(self.retire_view), name="ilr_deployment_retire"),
        ] + super().get_urls()

    def _context(self, request, title: str, **extra) -> dict:
        return {**self.admin_site.each_context(request), "opts": self.opts, "title": title, **extra}

    def cancel_view(self, request):
        """Confirm, then request cancellation of each workflow through ``cancel_in``."""
        if not self.has_cancel_permission(request):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else request.GET
        ids = data.getlist("ids")[:MAX_SELECTED]
        rows = list(selectors.workflows().filter(id__in=ids).order_by("id").values("id", "name", "version", "status"))
        if not rows:
            raise Http404("no such workflows")
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            answers = {r["id"]: services.workflow_cancel(user=request.user, workflow_id=r["id"]) for r in rows}
            done = [wf_id for wf_id, answer in answers.items() if answer]
            skipped = [r["id"] for r in rows if r["id"] not in done]
            if done:
                messages.success(request, f"Cancellation requested for {', '.join(done)}.")
            landing = [eid for answer in answers.values() for eid in answer.may_still_land]
            if landing:
                # A cancel cannot recall a send already authorized; the operator must hear which.
                messages.warning(request, f"Sends authorized before the cancel may still land: {', '.join(landing)}. "
                                          f"Their receipts will say what happened.")
            if skipped:
                messages.warning(request, f"Nothing to do for {', '.join(skipped)}: already ended or already "
                                          f"cancelled.")
            return HttpResponseRedirect(reverse("admin:ilr_workflow_changelist"))
        return TemplateResponse(request, "admin/approvals/confirm_cancel.html",
                                self._context(request, "Cancel workflows?", rows=rows))

    def resume_view(self, request):
        """Confirm (showing each workflow's error and kept steps), then resume each stuck one
        through ``resume_in``; a selected workflow that is not stuck is named and left alone."""
        if not self.has_resume_permission(request):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else request.GET
        ids = data.getlist("ids")[:MAX_SELECTED]
        rows = list(selectors.workflows().filter(id__in=ids).order_by("id").values(
            "id", "name", "version", "status", "error"))
        if not rows:
            raise Http404("no such workflows")
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            done, skipped = [], []
            for r in rows:
                try:
                    services.workflow_resume(user=request.user, workflow_id=r["id"])
                    done.append(r["id"])
                except InvalidInput:  # not stuck (any more): nothing written for it
                    skipped.append(r["id"])
            if done:
                messages.success(request, f"Resumed {', '.join(done)}: pending now; recorded steps are kept.")
            if skipped:
                messages.warning(request, f"Nothing to do for {', '.join(skipped)}: not stuck.")
            return HttpResponseRedirect(reverse("admin:ilr_workflow_changelist"))
        counts: dict[str, int] = {}
        for step in Step.objects.filter(workflow_id__in=[r["id"] for r in rows]).values_list("workflow_id", flat=True):
            counts[step] = counts.get(step, 0) + 1
        for r in rows:
            r["steps"] = counts.get(r["id"], 0)
            r["error_text"] = ((r["error"] or {}).get("message", "") if isinstance(r["error"], dict)
                               else (r["error"] or ""))
        stuck = [r for r in rows if r["status"] == "stuck"]
        return TemplateResponse(request, "admin/approvals/confirm_resume.html",
                                self._context(request, "Resume stuck workflows?", rows=rows, stuck=stuck))

    # -- deployments ----------------------------------------------------------------------------

    def deployments_view(self, request):
        """Every deployment with its drain report, and a retire link per live version."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return TemplateResponse(request, "admin/approvals/deployments.html", self._context(
            request, "Deployments", rows=selectors.deployments(), can_retire=self.has_retire_permission(request)))

    def retire_view(self, request):
        """Confirm (showing the drain report), then retire a version: no new starts; work drains."""
        if not self.has_retire_permission(request):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else request.GET
        name, version = data.get("name") or "", data.get("version") or ""
        deployment = Deployment.objects.filter(name=name, version=version).first()
        if deployment is None:
            raise Http404(f"no deployment {name}@{version}")
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            try:
                report = services.deployment_retire(user=request.user, name=name, version=version)
            except services.ActionRefused as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, f"Retired {name}@{version}: it takes no new starts. {report.summary()}")
            return HttpResponseRedirect(reverse("admin:ilr_deployments"))
        return TemplateResponse(request, "admin/approvals/confirm_retire.html", self._context(
            request, f"Retire {name}@{version}?", deployment=deployment,
            report=selectors.drain_report(name, version)))


# -- effects and the journal ---------------------------------------------------------------------

@admin.register(Effect)
class EffectAdmin(ReadOnlyAdmin):
    """Effects: state, tier, sends, deadlines, late result, reconciliation, link to the receipt."""

    list_display = ("effect_id", "workflow_link", "target", "tier", "state", "sends", "first_dispatched_at",
                    "send_deadline", "late", "reconciled_flag", "receipt_link")
    list_filter = ("state", "tier", "target")
    search_fields = ("effect_id",)
    search_help_text = "An effect id (or its start), or a workflow id."
    ordering = ("-first_dispatched_at",)
    fields = ("effect_id", "workflow_link", "receipt_link", "target", "tier", "state", "payload_pretty",
              "payload_hash", "grant_link", "dispatch_workflow_id", "dispatch_epoch", "first_dispatched_at",
              "send_deadline", "settle_margin", "settle_by", "sends", "late_result_pretty", "reconciled_pretty",
              "journal_table")
    readonly_fields = fields

    def get_search_results(self, request, queryset, search_term):
        """Exact effect id, effect id prefix, or exact workflow id."""
        return _indexed_search(queryset, search_term, ("effect_id", "workflow_id"), "effect_id")

    @admin.display(description="workflow")
    def workflow_link(self, obj):
        """The proposing workflow (by id: no join, so a sleeping-forever workflow never loads)."""
        return _link("admin:ilr_workflow_change", obj.workflow_id)

    @admin.display(description="grant")
    def grant_link(self, obj):
        """The grant of the current or last dispatch."""
        return _link("admin:ilr_grant_change", obj.grant_id) if obj.grant_id else "—"

    @admin.display(description="receipt")
    def receipt_link(self, obj):
        """The receipt page."""
        return _link("approvals:receipt", obj.effect_id, "receipt")

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
        return _pre(obj.payload)

    @admin.display(description="late result")
    def late_result_pretty(self, obj):
        """The late result, indented."""
        return _pre(obj.late_result) if obj.late_result is not None else "—"

    @admin.display(description="reconciled")
    def reconciled_pretty(self, obj):
        """The reconciliation, indented."""
        return _pre(obj.reconciled) if obj.reconciled is not None else "—"

    @admin.display(description="journal")
    def journal_table(self, obj):
        """The effect's journal entries."""
        rows = [[_link("admin:ilr_journalentry_change", j.seq), j.kind, j.hash[:16], (j.prev or "(first)")[:16]]
                for j in JournalEntry.objects.filter(effect_id=obj.effect_id).order_by("seq")]
        return _table(["seq", "kind", "hash", "prev"], rows)


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
        return _indexed_search(queryset, search_term, ("effect_id",), None)

    @admin.display(description="effect")
    def effect_link(self, obj):
        """The effect."""
        return _link("admin:ilr_effect_change", obj.effect_id)

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


# -- grants ----------------------------------------------------------------------------------------

class GrantStateFilter(admin.SimpleListFilter):
    """Live, revoked or expired grants."""

    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        """live, revoked, expired."""
        return [("live", "live"), ("revoked", "revoked"), ("expired", "expired")]

    def queryset(self, request, queryset):
        """Grants in the chosen state (database clock)."""
        from django.db.models.functions import Now

        if self.value() == "live":
            return queryset.filter(revoked_at__isnull=True).filter(Q(expires_at__isnull=True) | Q(expires_at__gt=Now()))
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        if self.value() == "expired":
            return queryset.filter(revoked_at__isnull=True, expires_at__lte=Now())
        return queryset


class GrantKindFilter(admin.SimpleListFilter):
    """Approvals (bound to one payload) or policy grants."""

    title = "kind"
    parameter_name = "kind"

    def lookups(self, request, model_admin):
        """approval, policy."""
        return [("approval", "approval of one payload"), ("policy", "policy grant")]

    def queryset(self, request, queryset):
        """Grants of the chosen kind."""
        if self.value() == "approval":
            return queryset.filter(payload_hash__isnull=False)
        if self.value() == "policy":
            return queryset.filter(payload_hash__isnull=True)
        return queryset


@admin.register(Grant)
class GrantAdmin(admin.ModelAdmin):
    """Grants: create a policy grant (``grant_in``); revoke with a confirmation page that then
    lists the effect ids revoke returned. Grants are otherwise read-only."""

    list_display = ("id", "principal", "action", "cap", "kind", "granted_by", "created_at", "expires_at", "revoked_at",
                    "revoked_by")
    list_filter = (GrantStateFilter, GrantKindFilter, "action")
    search_fields = ("id", "principal", "granted_by", "revoked_by")
    search_help_text = "A grant id (or its start), a principal, or a person who granted or revoked."
    ordering = ("-created_at",)
    list_per_page = 50
    show_full_result_count = False
    actions = ["revoke_selected"]
    change_form_template = "admin/approvals/grant_change_form.html"
    detail_fields = ("id", "principal", "action", "cap", "kind", "payload_hash", "facts_pretty", "granted_by",
                     "created_at", "expires_at", "revoked_at", "revoked_by", "effects_table")

    def has_add_permission(self, request):
        """approvals.grant: create a policy grant."""
        return request.user.has_perm("approvals.grant")

    def has_change_permission(self, request, obj=None):
        """Grants are never edited: revoke is the only change, and it is an action."""
        return False

    def has_delete_permission(self, request, obj=None):
        """Grants are never deleted (receipts refer to them)."""
        return False

    def has_revoke_permission(self, request):
        """approvals.revoke."""
        return request.user.has_perm("approvals.revoke")

    def get_search_results(self, request, queryset, search_term):
        """Exact id, principal or person, or an id prefix."""
        return _indexed_search(queryset, search_term, ("id", "principal", "granted_by", "revoked_by"), "id")

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
            obj.id = services.grant_create(user=request.user, principal=form.cleaned_data["principal"],
                                           action=form.cleaned_data["action"],
                                           max_cents=form.cleaned_data.get("max_cents"),
                                           expires_in=form.expires_in_seconds())
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
        return _pre(obj.facts_seen) if obj.facts_seen is not None else "—"

    @admin.display(description="effects under this grant")
    def effects_table(self, obj):
        """Effects dispatched under this grant."""
        rows = [[_link("admin:ilr_effect_change", e.effect_id), e.state, e.sends,
                 _link("approvals:receipt", e.effect_id, "receipt")]
                for e in Effect.objects.filter(grant_id=obj.id).order_by("effect_id")]
        return _table(["effect", "state", "sends", ""], rows)

    @admin.action(permissions=["revoke"], description="Revoke selected grants…")
    def revoke_selected(self, request, queryset):
        """Go to the revoke confirmation page for the selected grants."""
        ids = list(queryset.values_list("id", flat=True)[:MAX_SELECTED])
        return HttpResponseRedirect(reverse("admin:ilr_grant_revoke") + "?" + urlencode([("ids", i) for i in ids]))

    def get_urls(self):
        """The revoke confirmation page, before the default URLs."""
        return [path("revoke/", self.admin_site.admin_view(self.revoke_view), name="ilr_grant_revoke")] \
            + super().get_urls()

    def revoke_view(self, request):
        """Confirm, then revoke each grant through ``revoke_in`` and list the effect ids that may
        still land."""
        if not self.has_revoke_permission(request):
            raise PermissionDenied
        data = request.POST if request.method == "POST" else request.GET
        # Only what could be a grant id reaches the query (a NUL is a database error, not a 404).
        ids = [i for i in data.getlist("ids")[:MAX_SELECTED] if len(i) <= MAX_TEXT_LENGTH and "\x00" not in i]
        grants = list(Grant.objects.filter(id__in=ids).order_by("id"))
        if not grants:
            raise Http404("no such grants")
        context = {**self.admin_site.each_context(request), "opts": self.opts, "grants": grants}
        if request.method == "POST" and request.POST.get("confirm") == "yes":
            results = []
            for g in grants:
                try:
                    results.append({"grant": g, "landing": services.grant_revoke(user=request.user, grant_id=g.id)})
                except GrantNotFound:
                    raise Http404(f"no grant {g.id}") from None
                except InvalidInput as exc:  # revoked already (by someone else since the confirmation page)
                    results.append({"grant": g, "refused": exc.rule})
            revoked = [r for r in results if "refused" not in r]
            return TemplateResponse(request, "admin/approvals/revoke_done.html", {
                **context, "title": "Revoked" if revoked else "Not revoked", "results": results,
                "revoked": revoked})
        in_flight = {g.id: list(Effect.objects.filter(grant_id=g.id, state="dispatched")
                                .values_list("effect_id", flat=True)) for g in grants}
        return TemplateResponse(request, "admin/approvals/confirm_revoke.html", {
            **context, "title": "Revoke grants?", "rows": [{"grant": g, "in_flight": in_flight[g.id]} for g in grants],
            "revocable": [g for g in grants if g.revoked_at is None]})


# -- signals, model calls, responses -------------------------------------------------------------

class ConsumedFilter(admin.SimpleListFilter):
    """Consumed or waiting in the mailbox."""

    title = "consumed"
    parameter_name = "consumed"

    def lookups(self, request, model_admin):
        """yes, no."""
        return [("yes", "consumed"), ("no", "in the mailbox")]

    def queryset(self, request, queryset):
        """Signals consumed or not."""
        if self.value() == "yes":
            return queryset.filter(consumed_seq__isnull=False)
        if self.value() == "no":
            return queryset.filter(consumed_seq__isnull=True)
        return queryset


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
        return _indexed_search(queryset, search_term, ("workflow_id",), None)

    @admin.display(description="workflow")
    def workflow_link(self, obj):
        """The workflow (by id)."""
        return _link("admin:ilr_workflow_change", obj.workflow_id)

    @admin.display(description="payload")
    def payload_pretty(self, obj):
        """The payload, indented."""
        return _pre(obj.payload)


@admin.register(LlmCall)
class LlmCallAdmin(ReadOnlyAdmin):
    """Model calls, written before each call (discarded calls are counted from these)."""

    list_display = ("id", "workflow_id", "seq", "epoch", "request_hash", "started_at")
    search_fields = ("workflow_id",)
    ordering = ("-id",)

    def get_search_results(self, request, queryset, search_term):
        """Exact workflow id."""
        return _indexed_search(queryset, search_term, ("workflow_id",), None)


@admin.register(Response)
class ResponseAdmin(ReadOnlyAdmin):
    """The sender's response log: every target response, appended before T_commit."""

    list_display = ("id", "effect_id", "workflow_id", "epoch", "received_at")
    search_fields = ("effect_id",)
    ordering = ("-id",)

    def get_search_results(self, request, queryset, search_term):
        """Exact effect id or workflow id."""
        return _indexed_search(queryset, search_term, ("effect_id", "workflow_id"), None)


# -- approval requests ---------------------------------------------------------------------------

@admin.register(ApprovalRequest)
class ApprovalRequestAdmin(ReadOnlyAdmin):
    """Approval requests of every workflow (``ctx.request_approval``): read-only here; approve
    or reject in the review UI, which runs ``approve_request_in`` / ``reject_request_in``."""

    list_display = ("id", "summary", "workflow_id", "target", "action", "status", "approvers_display",
                    "requested_at", "expires_at", "review_link")
    list_filter = ("status", "action")
    search_fields = ("id", "workflow_id")
    ordering = ("-requested_at",)
    readonly_fields = ("payload_display", "premises_display", "approvals_display")

    def get_search_results(self, request, queryset, search_term):
        """Exact request id or workflow id."""
        return _indexed_search(queryset, search_term, ("id", "workflow_id"), None)

    @admin.display(description="approvers")
    def approvers_display(self, obj):
        """Who approved so far, and how many the request needs."""
        names = [a.get("by") for a in obj.approvals or []]
        return f"{', '.join(names) or '—'} ({len(names)} of {obj.approvals_needed})"

    @admin.display(description="review")
    def review_link(self, obj):
        """The request on its case page in the review UI (approve or reject there)."""
        return format_html('<a href="{}#request-{}">case page</a>', reverse("approvals:case", args=[obj.workflow_id]),
                           obj.id)

    @admin.display(description="payload")
    def payload_display(self, obj):
        return _pre(obj.payload)

    @admin.display(description="premises")
    def premises_display(self, obj):
        return _pre(obj.premises)

    @admin.display(description="approvals")
    def approvals_display(self, obj):
        return _pre(obj.approvals)
