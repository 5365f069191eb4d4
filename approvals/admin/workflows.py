"""The workflow admin: the list (filters by outcome, status, name and version; search by id) and
the detail page (step timeline, waiting state, effects, signals, children and claim history).

Workflow rows defer ``available_at`` (a sleeping-forever workflow holds 'infinity', which no
Python datetime holds) and show it as text. The list names every (name, version) with due work
and no live worker ("due, no live worker serves refund@v1"; ``rt.unserved()``), above it and on
each such row. Steps and claims (composite primary keys, which Django 5.2's admin cannot
register) are shown here; the actions are in ``approvals.admin.actions``, the deployments pages
in ``approvals.admin.deployments``.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.db import connection
from django.urls import reverse
from django.utils.html import format_html

from approvals import selectors
from approvals.admin.actions import WorkflowActions
from approvals.admin.common import ReadOnlyAdmin, indexed_search, link, pre, table
from approvals.admin.deployments import DeploymentViews
from approvals.admin.filters import DeploymentNameFilter, DeploymentVersionFilter, OutcomeFilter
from approvals.admin.operations import OperationsViews
from approvals.templatetags.approvals_extras import as_json, reveal_html
from ilr import NO_WORKER_ROW, TERMINAL, history_on
from ilr.models import Claim, Effect, Signal, Slot, Step, Workflow


@admin.register(Workflow)
class WorkflowAdmin(OperationsViews, WorkflowActions, DeploymentViews, ReadOnlyAdmin):
    """Workflows: filters by outcome, status, name and version; search by id; the detail page shows the
    step timeline, waiting state, effects, signals, children and claim history. The list names
    every (name, version) with due work and no live worker, above it and on each such row."""

    list_display = ("id", "name", "version", "status", "served", "waiting_on", "available", "created_at", "updated_at")
    list_filter = (OutcomeFilter, "status", DeploymentNameFilter, DeploymentVersionFilter)
    search_fields = ("id",)
    search_help_text = "A workflow id, or the start of one."
    ordering = ("-created_at",)
    show_facets = admin.ShowFacets.NEVER  # per-filter counts would scan every workflow
    actions = ["cancel_selected", "terminate_selected", "resume_selected"]
    change_list_template = "admin/approvals/workflow_change_list.html"
    fieldsets = [
        (
            None,
            {
                "fields": (
                    "id",
                    "name",
                    "version",
                    "status",
                    "review_link",
                    "waiting_state",
                    "last_error",
                    "available",
                    "priority",
                    "cancel_requested_at",
                    "cancel_requested_by",
                    "result_pretty",
                    "error_pretty",
                    "traceback_text",
                    "input_pretty",
                )
            },
        ),
        ("Lease", {"fields": ("epoch", "owner", "lease_expires_at", "takeovers", "resumed_by", "resumed_at")}),
        (
            "Lineage",
            {"fields": ("parent_link", "children_table", "continued_from", "forked_from", "created_at", "updated_at")},
        ),
        ("Step timeline", {"fields": ("history", "timeline")}),
        ("Effects", {"fields": ("effects_table",)}),
        ("Signals", {"fields": ("signals_table",)}),
        ("Concurrency", {"fields": ("concurrency_key", "concurrency_limit", "slots_table")}),
        ("Claims", {"fields": ("claims_table",), "classes": ("collapse",)}),
    ]
    readonly_fields = [f for _, opts in fieldsets for f in opts["fields"]]

    def get_queryset(self, request):
        """Workflows with ``available_at`` deferred and read as text (it may be 'infinity'),
        annotated with ``unserved`` (``selectors.with_unserved``)."""
        return selectors.with_unserved(selectors.workflows())

    def changelist_view(self, request, extra_context=None):
        """The list, with the (name, version) pairs that have due work and no live worker."""
        return super().changelist_view(
            request, {"unserved": selectors.unserved(), "no_worker_row": NO_WORKER_ROW, **(extra_context or {})}
        )

    @admin.display(description="served")
    def served(self, obj):
        """ "due, no live worker serves name@version" for a due workflow that nothing can claim."""
        if getattr(obj, "unserved", False):
            return format_html(
                "<strong style='color:#ba2121'>due, no live worker serves {}@{}</strong>", obj.name, obj.version
            )
        return "—"

    def get_search_results(self, request, queryset, search_term):
        """Search by exact id or id prefix (the primary key index serves both)."""
        return indexed_search(queryset, search_term, ("id",), "id")

    @admin.display(description="available at")
    def available(self, obj):
        """``available_at`` as text: 'never by itself' for 'infinity'; "—" once it ended (a
        workflow cancelled while queued keeps the 'infinity' it waited with)."""
        if obj.status in TERMINAL:
            return "—"
        text = getattr(obj, "available_at_text", None)
        if text == "infinity" and (obj.waiting or {}).get("kind") in ("slot", "lock"):
            return f"when a slot of {obj.waiting.get('key')} frees"
        return "never by itself (waits for a signal)" if text == "infinity" else text

    @admin.display(description="waiting on")
    def waiting_on(self, obj):
        """What a sleeping workflow waits for, in a few words."""
        w = obj.waiting or {}
        if not w:
            return "—"
        if w.get("kind") == "signal":
            return f"signal {w.get('signal')}"
        if w.get("kind") == "slot":
            return f"a slot of concurrency key {w.get('key')}"
        if w.get("kind") == "effect" and w.get("lookup_error"):
            # The effect could not read its target (effects.LOOKUP_RETRY): say so in the list.
            return f"effect lookup, attempt {w.get('lookup_attempt')} failed: {str(w['lookup_error'])[:80]}"
        if w.get("kind") == "retry" and w.get("last_error"):
            # A step or decision that failed and waits to retry (WorkflowContext._failed_attempt).
            e = w["last_error"]
            return (
                f"retry {w.get('name')}, attempt {e.get('attempt')} failed: {e.get('type')}: "
                f"{str(e.get('message'))[:80]}"
            )
        return w.get("kind") or as_json(w)

    @admin.display(description="waiting")
    def waiting_state(self, obj):
        """The full waiting state."""
        return pre(obj.waiting) if obj.waiting else "—"

    @admin.display(description="last failed attempt")
    def last_error(self, obj):
        """A step waiting to retry: the exception type, message, attempt number and time of its
        last failed attempt (``waiting["last_error"]``)."""
        e = (obj.waiting or {}).get("last_error")
        if not e:
            return "—"
        return format_html(
            "<strong>{}: </strong><pre style='white-space:pre-wrap;margin:0'>{}</pre>"
            "attempt {} of step {}, at {}; retry {} at {}",
            e.get("type"),
            e.get("message"),
            e.get("attempt"),
            obj.waiting.get("name"),
            e.get("at"),
            obj.waiting.get("attempt"),
            obj.waiting.get("until"),
        )

    @admin.display(description="review")
    def review_link(self, obj):
        """The workflow's page in the review UI."""
        return link("approvals:case", obj.id, "open in the review UI")

    @admin.display(description="result")
    def result_pretty(self, obj):
        """The result, indented."""
        return pre(obj.result) if obj.result is not None else "—"

    @admin.display(description="error")
    def error_pretty(self, obj):
        """The error, indented; a failed workflow's traceback is shown apart (``traceback_text``)."""
        if obj.error is None:
            return "—"
        error = obj.error
        if isinstance(error, dict):
            error = {k: v for k, v in error.items() if k != "traceback"}
        return pre(error)

    @admin.display(description="traceback")
    def traceback_text(self, obj):
        """A failed workflow's traceback as its worker formatted it (the last 8000 characters)."""
        tb = obj.error.get("traceback") if isinstance(obj.error, dict) else None
        return format_html("<pre style='white-space:pre-wrap;margin:0'>{}</pre>", tb) if tb else "—"

    @admin.display(description="input")
    def input_pretty(self, obj):
        """The input, indented."""
        return pre(obj.input)

    @admin.display(description="parent")
    def parent_link(self, obj):
        """The parent workflow."""
        return link("admin:ilr_workflow_change", obj.parent_id) if obj.parent_id else "—"

    @admin.display(description="children")
    def children_table(self, obj):
        """Child workflows with their parent close policies (what this workflow's end does to them)."""
        rows = (
            Workflow.objects.filter(parent_id=obj.id)
            .order_by("created_at")
            .values("id", "name", "status", "parent_close_policy")
        )
        return table(
            ["child", "name", "status", "parent close policy"],
            [
                [
                    link("admin:ilr_workflow_change", r["id"]),
                    r["name"],
                    r["status"],
                    r["parent_close_policy"] or "request_cancel",
                ]
                for r in rows
            ],
        )

    @admin.display(description="history")
    def history(self, obj):
        """The history's size against ILR_HISTORY_*: step rows and payload bytes, and the warning
        once past either threshold (one aggregate query for this workflow)."""
        connection.ensure_connection()
        h = history_on(connection.connection, obj.id)
        figures = f"{h['length']:,} step rows, {h['bytes']:,} bytes of payloads"
        if h["warning"]:
            return format_html("{}<br><strong>Warning: {}</strong>", figures, h["warning"])
        return figures

    @admin.display(description="steps")
    def timeline(self, obj):
        """The step timeline: seq, kind, name, time, epoch, output or error."""
        rows = []
        for s in Step.objects.filter(workflow_id=obj.id).order_by("seq"):
            out = s.error if s.error is not None else s.output
            text = as_json(out)
            rows.append(
                [
                    s.seq,
                    s.kind,
                    s.name,
                    f"{s.created_at:%Y-%m-%d %H:%M:%S.%f}"[:-3],
                    s.epoch,
                    ("ERROR " if s.error is not None else "") + (text[:200] + "…" if len(text) > 200 else text),
                ]
            )
        return table(["#", "kind", "name", "at (UTC)", "epoch", "output"], rows)

    @admin.display(description="effects")
    def effects_table(self, obj):
        """The workflow's effects, each with its receipt."""
        rows = [
            [
                link("admin:ilr_effect_change", e.effect_id),
                e.state,
                e.tier,
                e.sends,
                reveal_html(as_json(e.payload)),
                link("approvals:receipt", e.effect_id, "receipt"),
            ]
            for e in Effect.objects.filter(workflow_id=obj.id).order_by("effect_id")
        ]
        return table(["effect", "state", "tier", "sends", "payload", ""], rows)

    @admin.display(description="signals")
    def signals_table(self, obj):
        """The workflow's signals and whether they were consumed."""
        rows = [
            [
                link("admin:ilr_signal_change", s.id),
                s.name,
                s.sender or "—",
                s.consumed_seq if s.consumed_seq is not None else "not yet",
                reveal_html(as_json(s.payload)[:200]),
            ]
            for s in Signal.objects.filter(workflow_id=obj.id).order_by("id")
        ]
        return table(["#", "name", "sender", "consumed at step", "payload"], rows)

    @admin.display(description="slots")
    def slots_table(self, obj):
        """The workflow's slot rows (held, queued, released), and who else holds or waits for
        each live key."""
        rows = []
        for r in Slot.objects.filter(workflow_id=obj.id).order_by("id"):
            if r.released_at is not None:
                state = f"released ({r.released_why})"
            else:
                state = f"holding slot {r.slot_no}" if r.slot_no is not None else "queued"
            others = (
                Slot.objects.filter(key=r.key, released_at__isnull=True).exclude(workflow_id=obj.id).order_by("id")
                if r.released_at is None
                else []
            )
            rows.append(
                [
                    format_html(
                        '<a href="{}?{}">{}</a>', reverse("admin:ilr_slot_changelist"), urlencode({"q": r.key}), r.key
                    ),
                    state,
                    f"{r.acquired_at:%H:%M:%S}" if r.acquired_at else "—",
                    ", ".join(f"{o.workflow_id} ({'holds' if o.slot_no is not None else 'waits'})" for o in others)
                    or "—",
                ]
            )
        return table(["key", "state", "acquired at", "others live on the key"], rows)

    @admin.display(description="claims")
    def claims_table(self, obj):
        """Claim history: every epoch, its owner and lease."""
        rows = [
            [
                c.epoch,
                c.owner,
                c.version,
                f"{c.claimed_at:%H:%M:%S.%f}"[:-3],
                f"{c.lease_expires_at:%H:%M:%S}",
                c.prev_status,
            ]
            for c in Claim.objects.filter(workflow_id=obj.id).order_by("epoch")
        ]
        return table(["epoch", "owner", "version", "claimed at", "lease until", "previous status"], rows)
