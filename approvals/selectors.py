"""Reads for the admin and the review UI: paginated, over the read-only ilr models.

A workflow row may hold ``available_at = 'infinity'`` (waiting with no timeout), which no
Python datetime can hold, so every workflow query here defers that column and reads it as text
(``workflows()``). The approval queue's reads are in ``approvals.queue``, the case list's and
one case's in ``approvals.cases``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import BooleanField, Case, Exists, OuterRef, Q, TextField, Value, When
from django.db.models.functions import Cast, Now

from ilr import ACTIVE, describe_schedule_on, drain_report_in, queues_on, unserved_on
from ilr.models import Deployment, Effect, WorkerDeployment, Workflow

QUEUE_PAGE_SIZE = 20


def workflows():
    """``Workflow.objects`` with ``available_at`` deferred and annotated as text
    (``available_at_text``: an ISO timestamp or 'infinity')."""
    return Workflow.objects.defer("available_at").annotate(available_at_text=Cast("available_at", TextField()))


def due_q() -> Q:
    """A workflow a worker would claim now (ilr._queries.deployments.DUE_SQL): pending or sleeping and
    available, or running with a lapsed lease."""
    return Q(status__in=("pending", "sleeping"), available_at__lte=Now()) | Q(
        status="running", lease_expires_at__lte=Now()
    )


def live_workers():
    """worker_deployments rows whose worker is live (ilr._queries.deployments.LIVE_SQL)."""
    return WorkerDeployment.objects.filter(live_until__gt=Now())


def with_unserved(queryset):
    """``queryset`` (of workflows) annotated with ``unserved``: True for a workflow that is due
    (``due_q``) while no live worker serves its (name, version)."""
    live = live_workers().filter(name=OuterRef("name"), version=OuterRef("version"))
    return queryset.annotate(
        unserved=Case(
            When(due_q() & ~Exists(live), then=Value(True)), default=Value(False), output_field=BooleanField()
        )
    )


def unserved() -> list[dict]:
    """The (name, version) pairs with due work and no live worker (``rt.unserved()``'s SQL):
    [{"name", "version", "due", "last_seen"}]."""
    connection.ensure_connection()
    return unserved_on(connection.connection)


def schedule(schedule_id: str) -> dict:
    """A schedule with its next ticks, runs and missed ticks (``rt.describe_schedule``'s SQL)."""
    connection.ensure_connection()
    return describe_schedule_on(connection.connection, schedule_id)


def queues() -> list[dict]:
    """Every queue of ILR_QUEUES with its rule, how many hold a slot and wait, and recent starts
    (``rt.queues()``'s SQL)."""
    connection.ensure_connection()
    return queues_on(connection.connection)


# -- ambiguous effects ---------------------------------------------------------------------------


def ambiguous_effects(page: Any = 1, reconciled: bool = False, per_page: int = QUEUE_PAGE_SIZE) -> Page:
    """A page of AMBIGUOUS effects, oldest dispatch first: the ones still to reconcile, or (with
    ``reconciled``) the ones a person already attested."""
    qs = Effect.objects.filter(state="ambiguous", reconciled__isnull=not reconciled).order_by(
        "first_dispatched_at", "effect_id"
    )
    return Paginator(qs, per_page).get_page(page)


# -- deployments -------------------------------------------------------------------------------


@dataclass
class DrainReport:
    """Workflows of a deployment by (name, version, status), the oldest still active, and
    whether a live worker serves it.

    Attributes:
        counts: [{"name", "version", "status", "n"}] sorted.
        oldest_active: {"id", "status", "created_at"} of the oldest pending, running or sleeping
            workflow, or None when drained.
        workers: ids of the workers live for it (``live_workers``), sorted.
        due: workflows a worker would claim now (``due_q``).
    """

    name: str
    version: str | None
    counts: list[dict]
    oldest_active: dict | None
    workers: list[str] = field(default_factory=list)
    due: int = 0

    @property
    def active(self) -> int:
        """Workflows still pending, running or sleeping."""
        return sum(c["n"] for c in self.counts if c["status"] in ACTIVE)

    @property
    def drained(self) -> bool:
        """True when no workflow of the deployment is still active."""
        return self.active == 0

    @property
    def unserved(self) -> bool:
        """True when work is due and no live worker serves the deployment."""
        return self.due > 0 and not self.workers

    @property
    def label(self) -> str:
        """name@version (name alone for a report over every version)."""
        return f"{self.name}@{self.version}" if self.version is not None else self.name

    def summary(self) -> str:
        """One line: the counts, and the oldest active workflow or "drained"."""
        parts = [f"{c['name']}@{c['version']} {c['status']}: {c['n']}" for c in self.counts] or ["no workflows"]
        tail = (
            f"oldest active {self.oldest_active['id']} ({self.oldest_active['status']}, since "
            f"{self.oldest_active['created_at']:%Y-%m-%d %H:%M:%S %Z})"
            if self.oldest_active
            else "drained"
        )
        if self.unserved:
            tail += f"; due, no live worker serves {self.label}"
        return "; ".join(parts) + f"; {tail}."


def drain_report(name: str, version: str | None = None) -> DrainReport:
    """Counts of a deployment's workflows by (name, version, status), its oldest active one, its
    live workers and its due work (``version`` None: every version of ``name``, summed), from
    the runtime's drain report (``ilr.drain_report_in``) on Django's connection."""
    connection.ensure_connection()
    rows = drain_report_in(connection.connection, name, version)
    counts = sorted(
        (
            {"name": r["name"], "version": r["version"], "status": status, "n": n}
            for r in rows
            for status, n in r["counts"].items()
        ),
        key=lambda c: (c["name"], c["version"], c["status"]),
    )
    oldest = min(
        (r["oldest_pending"] for r in rows if r["oldest_pending"] is not None),
        key=lambda o: (o["created_at"], o["id"]),
        default=None,
    )
    workers = sorted({w for r in rows for w in r["workers"]})
    return DrainReport(name, version, counts, oldest, workers, sum(r["due"] for r in rows))


def deployments() -> list[dict]:
    """Every deployment, newest first, with its drain report."""
    rows = []
    for d in Deployment.objects.order_by("name", "-created_at", "-version"):
        rows.append({"deployment": d, "report": drain_report(d.name, d.version)})
    return rows
