"""The admin's operations page (``OperationsViews``, a mixin of WorkflowAdmin, as the deployments
page is): the state figures at a glance (``ilr._telemetry.figures``, the same ones the gauges
report) and the items that need a person, each linking to its admin page: the oldest pending
approval requests, ambiguous effects awaiting reconciliation, stuck workflows, unserved
versions. Read-only; staff with the workflow view permission. Linked from the admin index
(``admin/approvals/index.html``) and the workflow list.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import connection
from django.template.response import TemplateResponse
from django.urls import path

from approvals.admin.common import page_context
from ilr import figures_on


def age(seconds: float | None) -> str:
    """``seconds`` as a short age ("45 s", "12 min", "3.5 h", "2.0 d"); "—" for None."""
    if seconds is None:
        return "—"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def plural(n: int, word: str) -> str:
    """ "1 run", "2 runs"."""
    return f"{n} {word}" + ("" if n == 1 else "s")


class OperationsViews:
    """The operations page (``admin:ilr_operations``)."""

    def get_urls(self):
        """The operations page, before the URLs of the classes after this one."""
        return [
            path("operations/", self.admin_site.admin_view(self.operations_view), name="ilr_operations"),
        ] + super().get_urls()

    def operations_view(self, request):
        """The figures and the items that need a person, read once (one transaction)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        connection.ensure_connection()
        f = figures_on(connection.connection)
        oldest_approval = f"oldest {age(f.approval_oldest_age_s)}"
        glance = [
            ("approvals-pending", "Approval requests pending", f.approvals_pending, oldest_approval),
            ("effects-ambiguous", "Ambiguous effects to reconcile", f.effects_ambiguous, ""),
            ("workflows-stuck", "Stuck workflows", f.workflows_stuck, ""),
            ("workflows-due", "Due now", f.due_total, f"oldest waited {age(f.due_oldest_age_s)}" if f.due else ""),
            ("versions-unserved", "Unserved versions", len(f.unserved), f"{sum(u['due'] for u in f.unserved)} due"),
            ("workers-live", "Live workers", f.workers_live, plural(f.runs_held, "run") + " held"),
            ("keys-waiting", "Waiting on keys", f.keys["waiting"], plural(f.keys["holding"], "slot") + " held"),
            ("queues-waiting", "Waiting in queues", sum(q["waiting"] + q["put_off"] for q in f.queues), ""),
            ("schedules-overdue", "Schedules overdue", f.schedules_overdue, f"lag {age(f.schedule_lag_s)}"),
        ]
        needs_person = {
            "approvals-pending": f.approvals_pending,
            "effects-ambiguous": f.effects_ambiguous,
            "workflows-stuck": f.workflows_stuck,
            "versions-unserved": len(f.unserved),
            "schedules-overdue": f.schedules_overdue,
        }
        return TemplateResponse(
            request,
            "admin/approvals/operations.html",
            page_context(
                self,
                request,
                "Operations",
                figures=f,
                glance=[
                    {"key": k, "label": label, "value": v, "note": note, "alert": bool(needs_person.get(k))}
                    for k, label, v, note in glance
                ],
                approvals=[{**a, "age": age(a["age_s"])} for a in f.oldest_approvals],
                due=[{**d, "age": age(d["oldest_age_s"])} for d in f.due],
                queues=[{**q, "age": age(q["oldest_waiting_age_s"])} for q in f.queues],
                stuck_after=age(f.stuck_after_s),
            ),
        )
