"""The admin's list filters: workflows by outcome, name and version; grants by state and kind;
signals by whether they were consumed. Each filters on an indexed or small column (or on
``approvals.cases.OUTCOMES``' conditions), so lists stay fast on large tables."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Q
from django.db.models.functions import Now

from approvals.cases import OUTCOMES, with_outcome
from ilr.models import Deployment

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


# -- signals -------------------------------------------------------------------------------------


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
