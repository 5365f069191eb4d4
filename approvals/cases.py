"""Cases: the case list by outcome (the review UI's Cases page and the admin's outcome filter) and
one case's detail (the case page).

An outcome is what an operations team sorts its day by, each a condition on a workflow and the
rows beside it (one definition, used by the page and the admin alike):

- ``waiting``: an approval request of the workflow is pending and not expired;
- ``refused``: one of its effects stands refused (``refused``): the runtime's checks refused it
  (premises changed, grant revoked or expired, cancelled, the target said no);
- ``ambiguous``: one of its effects has an unknown outcome that no person has reconciled yet;
- ``failed`` and ``stuck``: the workflow's own status (a failed workflow ended with an error; a
  stuck one waits for an operator, ``manage.py ilr_resume``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, OuterRef, Q
from django.utils import timezone

from approvals.selectors import workflows
from ilr.models import ApprovalRequest, Claim, Effect, JournalEntry, Signal, Slot, Step, Workflow

CASES_PAGE_SIZE = 50


def refused() -> Q:
    """The one definition of a refused effect, as a condition on an ``ilr.effects`` row: a REFUSED
    entry is in its journal and nothing was sent since. A refusal leaves the effect proposed
    (never sent, or not sent again); a later send of the same effect moves it on."""
    return Q(Exists(JournalEntry.objects.filter(effect_id=OuterRef("effect_id"), kind="REFUSED")), state="proposed")


def flag(condition: Q) -> ExpressionWrapper:
    """``condition`` as a boolean column, for ``annotate``."""
    return ExpressionWrapper(condition, output_field=BooleanField())


@dataclass(frozen=True)
class Outcome:
    """One outcome: its label in words and the condition on a workflow row (a Q)."""

    label: str
    condition: Callable[[], Q]


# The conditions on rows beside the workflow are uncorrelated IN subqueries: PostgreSQL runs each
# once and hashes it, where a correlated EXISTS in counts()' FILTER would run once per workflow.


def _pending_request() -> Q:
    return Q(
        id__in=ApprovalRequest.objects.filter(status="pending", expires_at__gt=timezone.now()).values("workflow_id")
    )


def _effect(condition: Q) -> Q:
    """An effect of the workflow meets ``condition``."""
    return Q(id__in=Effect.objects.filter(condition).values("workflow_id"))


OUTCOMES: dict[str, Outcome] = {
    "waiting": Outcome("waiting for approval", _pending_request),
    "refused": Outcome("refused", lambda: _effect(refused())),
    "ambiguous": Outcome("ambiguous", lambda: _effect(Q(state="ambiguous", reconciled__isnull=True))),
    "failed": Outcome("failed", lambda: Q(status="failed")),
    "stuck": Outcome("stuck", lambda: Q(status="stuck")),
}


def with_outcome(queryset, outcome: str):
    """``queryset`` (of workflows) narrowed to one outcome.

    Raises:
        KeyError: ``outcome`` is not one of OUTCOMES.
    """
    return queryset.filter(OUTCOMES[outcome].condition())


def cases(outcome: str | None = None, page: Any = 1, per_page: int = CASES_PAGE_SIZE) -> Page:
    """A page of workflows, most recently changed first, each annotated with ``outcomes``: the
    labels of every outcome it is in.

    Args:
        outcome: one of OUTCOMES, or None for every workflow.
        page: a page number (bad values give the first or last page).

    Raises:
        KeyError: an unknown outcome.
    """
    qs = workflows().order_by("-updated_at", "id")
    if outcome is not None:
        qs = with_outcome(qs, outcome)
    qs = qs.annotate(**{f"is_{name}": flag(o.condition()) for name, o in OUTCOMES.items()})
    current = Paginator(qs, per_page).get_page(page)
    for w in current.object_list:
        w.outcomes = [o.label for name, o in OUTCOMES.items() if getattr(w, f"is_{name}")]
    return current


def counts() -> dict[str, int]:
    """How many workflows are in each outcome, {outcome: n}, in one aggregate query."""
    # Prefixed: an aggregate may not be named as a field of the model is (workflows.waiting).
    totals = Workflow.objects.aggregate(
        **{f"n_{name}": Count("id", filter=o.condition()) for name, o in OUTCOMES.items()}
    )
    return {name: totals[f"n_{name}"] for name in OUTCOMES}


# -- one case ------------------------------------------------------------------------------------


@dataclass
class WorkflowDetail:
    """A workflow with its step timeline, signals, effects (each with ``refused``: see
    ``refused``), children, claim history, and its concurrency keys and locks (``key_states``)."""

    workflow: Workflow
    steps: list[Step]
    signals: list[Signal]
    effects: list[Effect]
    children: list[dict]
    claims: list[Claim]
    keys: list[dict]


def workflow_detail(workflow_id: str) -> WorkflowDetail:
    """Everything the case page shows about one workflow.

    Raises:
        Workflow.DoesNotExist: unknown id.
    """
    w = workflows().get(id=workflow_id)
    return WorkflowDetail(
        workflow=w,
        steps=list(Step.objects.filter(workflow_id=workflow_id).order_by("seq")),
        signals=list(Signal.objects.filter(workflow_id=workflow_id).order_by("id")),
        effects=list(
            Effect.objects.filter(workflow_id=workflow_id).order_by("effect_id").annotate(refused=flag(refused()))
        ),
        children=list(
            Workflow.objects.filter(parent_id=workflow_id).order_by("created_at").values("id", "name", "status")
        ),
        claims=list(Claim.objects.filter(workflow_id=workflow_id).order_by("epoch")),
        keys=key_states(workflow_id),
    )


def key_states(workflow_id: str) -> list[dict]:
    """The workflow's live slot rows: per key {"key", "holding" (its slot number or None),
    "position" (1 = next, while it waits), "holders" (the workflows holding the key),
    "waiting" (how many wait)}."""
    out = []
    for row in Slot.objects.filter(workflow_id=workflow_id, released_at__isnull=True).order_by("id"):
        live = list(
            Slot.objects.filter(key=row.key, released_at__isnull=True)
            .order_by("-priority", "queued_at", "id")
            .values("workflow_id", "slot_no")
        )
        waiters = [r["workflow_id"] for r in live if r["slot_no"] is None]
        out.append(
            {
                "key": row.key,
                "holding": row.slot_no,
                "position": waiters.index(workflow_id) + 1 if workflow_id in waiters else None,
                "holders": [r["workflow_id"] for r in live if r["slot_no"] is not None],
                "waiting": len(waiters),
            }
        )
    return out
