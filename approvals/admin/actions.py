"""The admin's writes, each an action with a confirmation page: cancel, terminate and resume
workflows (``WorkflowActions``), revoke grants (``GrantActions``). The action redirects to the page with
the selected ids; the page shows what will happen and, on confirm, calls ``approvals.services``
(the runtime's transaction body plus a LogEntry, in one transaction) once per row.

Each class is a mixin of its ModelAdmin: its ``get_urls`` puts the page's URL before the
ModelAdmin's own.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from approvals import selectors, services
from approvals.admin.common import confirmed, page_context, selected_ids, to_confirmation
from ilr import GrantNotFound, InvalidInput
from ilr.models import Effect, Grant, Step


def _report_reach(request, answers, children_title: str, verb: str) -> None:
    """Tell the operator what a cancel or terminate (``verb``) did to each workflow's children and
    which sends authorized before it may still land (``CancelRequest``/``TerminateRequest``)."""
    answers = list(answers)
    reached = [f"{c} ({what})" for answer in answers for c, what in answer.children.items()]
    if reached:
        messages.info(request, f"{children_title}: {', '.join(reached)}.")
    landing = [eid for answer in answers for eid in answer.may_still_land]
    if landing:
        # Neither can recall a send already authorized; the operator must hear which.
        messages.warning(
            request,
            f"Sends authorized before the {verb} may still land: {', '.join(landing)}. "
            f"Their receipts will say what happened.",
        )


# -- workflows: cancel, terminate, resume --------------------------------------------------------


class WorkflowActions:
    """Cancel (``cancel_in``), terminate (``terminate_in``) and resume stuck workflows
    (``resume_in``), for WorkflowAdmin."""

    def has_cancel_permission(self, request):
        """approvals.cancel."""
        return request.user.has_perm("approvals.cancel")

    def has_terminate_permission(self, request):
        """approvals.terminate."""
        return request.user.has_perm("approvals.terminate")

    def has_resume_permission(self, request):
        """approvals.resume."""
        return request.user.has_perm("approvals.resume")

    @admin.action(permissions=["cancel"], description="Cancel selected workflows…")
    def cancel_selected(self, request, queryset):
        """Go to the cancel confirmation page for the selected workflows."""
        return to_confirmation("admin:ilr_workflow_cancel", queryset)

    @admin.action(permissions=["terminate"], description="Terminate selected workflows (no compensation)…")
    def terminate_selected(self, request, queryset):
        """Go to the terminate confirmation page for the selected workflows."""
        return to_confirmation("admin:ilr_workflow_terminate", queryset)

    @admin.action(permissions=["resume"], description="Resume stuck workflows…")
    def resume_selected(self, request, queryset):
        """Go to the resume confirmation page for the selected workflows."""
        return to_confirmation("admin:ilr_workflow_resume", queryset)

    def get_urls(self):
        """The cancel and resume confirmation pages, before the URLs of the classes after this one."""
        wrap = self.admin_site.admin_view
        return [
            path("cancel/", wrap(self.cancel_view), name="ilr_workflow_cancel"),
            path("terminate/", wrap(self.terminate_view), name="ilr_workflow_terminate"),
            path("resume/", wrap(self.resume_view), name="ilr_workflow_resume"),
        ] + super().get_urls()

    def cancel_view(self, request):
        """Confirm, then request cancellation of each workflow through ``cancel_in``."""
        if not self.has_cancel_permission(request):
            raise PermissionDenied
        ids = selected_ids(request)
        rows = list(selectors.workflows().filter(id__in=ids).order_by("id").values("id", "name", "version", "status"))
        if not rows:
            raise Http404("no such workflows")
        if confirmed(request):
            answers = {r["id"]: services.workflow_cancel(user=request.user, workflow_id=r["id"]) for r in rows}
            done = [wf_id for wf_id, answer in answers.items() if answer]
            skipped = [r["id"] for r in rows if r["id"] not in done]
            if done:
                messages.success(request, f"Cancellation requested for {', '.join(done)}.")
            _report_reach(request, answers.values(), "Children reached", "cancel")
            if skipped:
                messages.warning(
                    request, f"Nothing to do for {', '.join(skipped)}: already ended or already cancelled."
                )
            return HttpResponseRedirect(reverse("admin:ilr_workflow_changelist"))
        return TemplateResponse(
            request, "admin/approvals/confirm_cancel.html", page_context(self, request, "Cancel workflows?", rows=rows)
        )

    def terminate_view(self, request):
        """Confirm with a reason (required), then end each workflow through ``terminate_in``: no
        compensation; each child handled by its parent close policy (shown before confirming)."""
        if not self.has_terminate_permission(request):
            raise PermissionDenied
        ids = selected_ids(request)
        rows = list(selectors.workflows().filter(id__in=ids).order_by("id").values("id", "name", "version", "status"))
        if not rows:
            raise Http404("no such workflows")
        reason = request.POST.get("reason", "").strip() if request.method == "POST" else ""
        problem = ""
        if confirmed(request):
            if not reason:
                problem = "reason: say why the workflows are terminated (it is kept in each one's error)."
            else:
                return self._terminate(request, rows, reason)
        children = list(
            selectors.workflows()
            .filter(parent_id__in=[r["id"] for r in rows], status__in=("pending", "running", "sleeping"))
            .order_by("parent_id", "id")
            .values("id", "parent_id", "status", "parent_close_policy")
        )
        return TemplateResponse(
            request,
            "admin/approvals/confirm_terminate.html",
            page_context(
                self, request, "Terminate workflows?", rows=rows, children=children, problem=problem, reason=reason
            ),
        )

    def _terminate(self, request, rows, reason):
        answers = {
            r["id"]: services.workflow_terminate(user=request.user, workflow_id=r["id"], reason=reason) for r in rows
        }
        done = [wf_id for wf_id, answer in answers.items() if answer]
        if done:
            messages.success(request, f"Terminated {', '.join(done)}: no compensation ran.")
        _report_reach(request, answers.values(), "Children by their parent close policies", "terminate")
        skipped = [r["id"] for r in rows if r["id"] not in done]
        if skipped:
            messages.warning(request, f"Nothing to do for {', '.join(skipped)}: already ended.")
        return HttpResponseRedirect(reverse("admin:ilr_workflow_changelist"))

    def resume_view(self, request):
        """Confirm (showing each workflow's error and kept steps), then resume each stuck one
        through ``resume_in``; a selected workflow that is not stuck is named and left alone."""
        if not self.has_resume_permission(request):
            raise PermissionDenied
        ids = selected_ids(request)
        rows = list(
            selectors.workflows().filter(id__in=ids).order_by("id").values("id", "name", "version", "status", "error")
        )
        if not rows:
            raise Http404("no such workflows")
        if confirmed(request):
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
            r["error_text"] = (
                (r["error"] or {}).get("message", "") if isinstance(r["error"], dict) else (r["error"] or "")
            )
        stuck = [r for r in rows if r["status"] == "stuck"]
        return TemplateResponse(
            request,
            "admin/approvals/confirm_resume.html",
            page_context(self, request, "Resume stuck workflows?", rows=rows, stuck=stuck),
        )


# -- grants: revoke ------------------------------------------------------------------------------


class GrantActions:
    """Revoke grants (``revoke_in``), for GrantAdmin; the page after lists the effect ids revoke
    returned: "these may still land"."""

    def has_revoke_permission(self, request):
        """approvals.revoke."""
        return request.user.has_perm("approvals.revoke")

    @admin.action(permissions=["revoke"], description="Revoke selected grants…")
    def revoke_selected(self, request, queryset):
        """Go to the revoke confirmation page for the selected grants."""
        return to_confirmation("admin:ilr_grant_revoke", queryset)

    def get_urls(self):
        """The revoke confirmation page, before the default URLs."""
        return [
            path("revoke/", self.admin_site.admin_view(self.revoke_view), name="ilr_grant_revoke")
        ] + super().get_urls()

    def revoke_view(self, request):
        """Confirm, then revoke each grant through ``revoke_in`` and list the effect ids that may
        still land."""
        if not self.has_revoke_permission(request):
            raise PermissionDenied
        ids = selected_ids(request)
        grants = list(Grant.objects.filter(id__in=ids).order_by("id"))
        if not grants:
            raise Http404("no such grants")
        if confirmed(request):
            results = []
            for g in grants:
                try:
                    results.append({"grant": g, "landing": services.grant_revoke(user=request.user, grant_id=g.id)})
                except GrantNotFound:
                    raise Http404(f"no grant {g.id}") from None
                except InvalidInput as exc:  # revoked already (by someone else since the confirmation page)
                    results.append({"grant": g, "refused": exc.rule})
            revoked = [r for r in results if "refused" not in r]
            return TemplateResponse(
                request,
                "admin/approvals/revoke_done.html",
                page_context(
                    self,
                    request,
                    "Revoked" if revoked else "Not revoked",
                    grants=grants,
                    results=results,
                    revoked=revoked,
                ),
            )
        in_flight = {
            g.id: list(Effect.objects.filter(grant_id=g.id, state="dispatched").values_list("effect_id", flat=True))
            for g in grants
        }
        return TemplateResponse(
            request,
            "admin/approvals/confirm_revoke.html",
            page_context(
                self,
                request,
                "Revoke grants?",
                grants=grants,
                rows=[{"grant": g, "in_flight": in_flight[g.id]} for g in grants],
                revocable=[g for g in grants if g.revoked_at is None],
            ),
        )
