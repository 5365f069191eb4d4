"""The admin's deployments page and its retire confirmation (``DeploymentViews``, a mixin of
WorkflowAdmin: the deployments table has a composite primary key, which Django 5.2's admin
cannot register, so its pages hang off the workflow admin and link from the workflow list).

Each deployment is shown with its drain report (``selectors.drain_report``), which says when
work is due and no live worker serves its (name, version).
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse

from approvals import selectors, services
from approvals.admin.common import confirmed, page_context, submitted
from ilr.models import Deployment


class DeploymentViews:
    """Every deployment with its drain report; retire a version (``services.deployment_retire``)."""

    def has_retire_permission(self, request):
        """approvals.retire."""
        return request.user.has_perm("approvals.retire")

    def get_urls(self):
        """The deployments page and the retire confirmation page, before the URLs of the classes
        after this one."""
        wrap = self.admin_site.admin_view
        return [
            path("deployments/", wrap(self.deployments_view), name="ilr_deployments"),
            path("deployments/retire/", wrap(self.retire_view), name="ilr_deployment_retire"),
        ] + super().get_urls()

    def deployments_view(self, request):
        """Every deployment with its drain report, and a retire link per live version."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        return TemplateResponse(
            request,
            "admin/approvals/deployments.html",
            page_context(
                self,
                request,
                "Deployments",
                rows=selectors.deployments(),
                can_retire=self.has_retire_permission(request),
            ),
        )

    def retire_view(self, request):
        """Confirm (showing the drain report), then retire a version: no new starts; work drains."""
        if not self.has_retire_permission(request):
            raise PermissionDenied
        data = submitted(request)
        name, version = data.get("name") or "", data.get("version") or ""
        deployment = Deployment.objects.filter(name=name, version=version).first()
        if deployment is None:
            raise Http404(f"no deployment {name}@{version}")
        if confirmed(request):
            try:
                report = services.deployment_retire(user=request.user, name=name, version=version)
            except services.ActionRefused as exc:
                messages.error(request, str(exc))
            else:
                messages.success(request, f"Retired {name}@{version}: it takes no new starts. {report.summary()}")
            return HttpResponseRedirect(reverse("admin:ilr_deployments"))
        return TemplateResponse(
            request,
            "admin/approvals/confirm_retire.html",
            page_context(
                self,
                request,
                f"Retire {name}@{version}?",
                deployment=deployment,
                report=selectors.drain_report(name, version),
            ),
        )
