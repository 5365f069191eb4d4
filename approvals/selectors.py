"""Reads for the admin and the review UI: paginated, over the read-only ilr models.

A workflow row may hold ``available_at = 'infinity'`` (waiting with no timeout), which no
Python datetime can hold, so every workflow query here defers that column and reads it as text
(``workflows()``). The approval queue's reads are in ``approvals.queue``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import BooleanField, Case, Count, Exists, OuterRef, Q, TextField, Value, When
from django.db.models.functions import Cast, Now

from ilr import db, receipts
from ilr.grants import EffectNotFound
from ilr.models import Claim, Deployment, Effect, Signal, Step, WorkerDeployment, Workflow
from ilr.runtime import UNSERVED_SQL

ACTIVE = ("pending", "running", "sleeping")
QUEUE_PAGE_SIZE = 20


def workflows():
    """``Workflow.objects`` with ``available_at`` deferred and annotated as text
    (``available_at_text``: an ISO timestamp or 'infinity')."""
    return Workflow.objects.defer("available_at").annotate(available_at_text=Cast("available_at", TextField()))


def due_q() -> Q:
    """A workflow a worker would claim now (ilr.runtime.DUE_SQL): pending or sleeping and
    available, or running with a lapsed lease."""
    return Q(status__in=("pending", "sleeping"), available_at__lte=Now()) | Q(status="running",
                                                                              lease_expires_at__lte=Now())


def live_workers():
    """worker_deployments rows whose worker is live (ilr.runtime.LIVE_SQL)."""
    return WorkerDeployment.objects.filter(live_until__gt=Now())


def with_unserved(queryset):
    """``queryset`` (of workflows) annotated with ``unserved``: True for a workflow that is due
    (``due_q``) while no live worker serves its (name, version)."""
    live = live_workers().filter(name=OuterRef("name"), version=OuterRef("version"))
    return queryset.annotate(unserved=Case(When(due_q() & ~Exists(live), then=Value(True)), default=Value(False),
                                           output_field=BooleanField()))


def unserved() -> list[dict]:
    """The (name, version) pairs with due work and no live worker (``rt.unserved()``'s SQL):
    [{"name", "version", "due", "last_seen"}]."""
    with connection.cursor() as cur:
        cur.execute(UNSERVED_SQL)
        columns = [c.name for c in cur.description]
        return [dict(zip(columns, row)) for row in cur.fetchall()]


# -- one workflow --------------------------------------------------------------------------------

@dataclass
class WorkflowDetail:
    """A workflow with its step timeline, signals, effects, children and claim history."""

    workflow: Workflow
    steps: list[Step]
    signals: list[Signal]
    effects: list[Effect]
    children: list[dict]
    claims: list[Claim]


def workflow_detail(workflow_id: str) -> WorkflowDetail:
    """Everything the detail pages show about one workflow.

    Raises:
        Workflow.DoesNotExist: unknown id.
    """
    w = workflows().get(id=workflow_id)
    return WorkflowDetail(
        workflow=w,
        steps=list(Step.objects.filter(workflow_id=workflow_id).order_by("seq")),
        signals=list(Signal.objects.filter(workflow_id=workflow_id).order_by("id")),
        effects=list(Effect.objects.filter(workflow_id=workflow_id).order_by("effect_id")),
        children=list(Workflow.objects.filter(parent_id=workflow_id).order_by("created_at")
                      .values("id", "name", "status")),
        claims=list(Claim.objects.filter(workflow_id=workflow_id).order_by("epoch")),
    )


# -- ambiguous effects ---------------------------------------------------------------------------

def ambiguous_effects(page: Any = 1, reconciled: bool = False, per_page: int = QUEUE_PAGE_SIZE) -> Page:
    """A page of AMBIGUOUS effects, oldest dispatch first: the ones still to reconcile, or (with
    ``reconciled``) the ones a person already attested."""
    qs = Effect.objects.filter(state="ambiguous", reconciled__isnull=not reconciled) \
        .order_by("first_dispatched_at", "effect_id")
    return Paginator(qs, per_page).get_page(page)


# -- receipts --------------------------------------------------------------------------------------

@dataclass
class Answer:
    """verify()'s answer to one of P1..P5, in words."""

    code: str
    question: str
    verdict: str
    explanation: str
    good: bool | None


@dataclass
class ChainEntry:
    """One journal entry of a receipt, parsed for display."""

    number: int
    kind: str
    at: dt.datetime | None
    via: str | None
    hash: str
    prev: str | None
    signed: bool
    fields: str
    problems: list[str]


@dataclass
class Receipt:
    """A receipt bundle, verify()'s result and its answers."""

    effect_id: str
    bundle: dict
    verdict: dict
    answers: list[Answer]
    chain: list[ChainEntry]

    @property
    def unverifiable(self) -> bool:
        """True when the only problems are entries with no signature under a known key."""
        v = self.verdict
        return bool(v.get("unsigned")) and len(v.get("problems", ())) == v["unsigned"] and bool(v.get("valid"))

    @property
    def tampered(self) -> bool:
        """True when verify() found the journal changed or broken (not merely unsigned)."""
        return not (self.verdict.get("tamper_evident") and self.verdict.get("valid")) and not self.unverifiable

    def bundle_json(self) -> str:
        """The bundle as pretty JSON, as downloaded."""
        return json.dumps(self.bundle, indent=2, sort_keys=True, ensure_ascii=False)


def _refusal_words(refusals: list[dict], at: str) -> str:
    """The refusals at ``at`` ("dispatch" or "recovery") in one sentence, or ""."""
    found = [r for r in refusals if r["at"] == at]
    if not found:
        return ""
    parts = []
    for r in found:
        if r["premise_violations"]:
            parts.append("the premises had changed: " + "; ".join(r["premise_violations"]))
        elif r["grant_refused"]:
            parts.append("the grant no longer covered it (revoked, expired, or for another payload)")
        else:
            parts.append(r["reason"])
    return "; ".join(parts)


def _answers(v: dict, b: dict) -> list[Answer]:
    happened, once, auth, held = v["happened"], v["happened_once"], v["authorized_when_fired"], v["assumptions_held"]
    sends = v.get("sends")
    refusals = v.get("refusals") or []
    at_dispatch, at_recovery = _refusal_words(refusals, "dispatch"), _refusal_words(refusals, "recovery")
    out = []
    if happened is True:
        out.append(Answer("P1", "Did it happen?", "Yes",
                          "The target confirmed the effect: the journal holds its COMMITTED entry.", True))
    elif happened is False:
        why = (f" It was refused before it was sent: {at_dispatch}." if at_dispatch else
               f" Recovery refused it: {at_recovery}." if at_recovery else "")
        out.append(Answer("P1", "Did it happen?", "No",
                          "It was never applied: the journal shows it refused or never sent." + why, True))
    else:
        out.append(Answer("P1", "Did it happen?", "Unknown",
                          "It was sent but no answer was recorded (AMBIGUOUS or still open): a person must "
                          "reconcile it against the target's records.", None))
    if happened is False:
        out.append(Answer("P2", "Did it happen at most once?", "Yes", "It did not happen at all.", True))
    elif once is True:
        out.append(Answer("P2", "Did it happen exactly once?", "Yes",
                          f"One application ({sends} send{'s' if sends != 1 else ''} under one idempotency key).",
                          True))
    elif once is False:
        out.append(Answer("P2", "Did it happen exactly once?", "No",
                          "The journal shows a second application (a late result after a reapply).", False))
    elif happened is True:
        out.append(Answer("P2", "Did it happen exactly once?", "Unknown",
                          "Recovery reapplied it after a send whose answer never came. Had that send been "
                          "applied late, after the send deadline plus the settle margin (A2), the target "
                          "applied it twice: a person must check the target's records.", None))
    else:
        out.append(Answer("P2", "Did it happen exactly once?", "Unknown",
                          "Whether it happened is unknown, so how often is too.", None))
    if auth is None:
        out.append(Answer("P3", "Was it authorized when it fired?", "Not applicable: nothing was sent",
                          f"Nothing was sent. The check before sending refused it: {at_dispatch}." if at_dispatch
                          else "Nothing was sent.", None))
    elif auth:
        later = (f" Recovery later refused to send it again: {at_recovery}." if at_recovery else "")
        out.append(Answer("P3", "Was it authorized when it fired?", "Yes",
                          "Every send carried a live, unrevoked, unexpired grant that covered this exact payload "
                          "and amount." + later, True))
    else:
        out.append(Answer("P3", "Was it authorized when it fired?", "No",
                          "A send went out without a live grant covering it; see the problems below.", False))
    if held is None:
        out.append(Answer("P4", "Did its assumptions hold?", "Not applicable: nothing was sent",
                          f"Nothing was sent: the check before sending found that {at_dispatch}, and refused it."
                          if at_dispatch else "Nothing was sent, so no premise was relied on.", None))
    elif held:
        later = (f" A later re-check at recovery found that {at_recovery}, and refused to send again: the "
                 f"premises no longer hold." if at_recovery else "")
        out.append(Answer("P4", "Did its assumptions hold?", "Yes, at every send" if at_recovery else "Yes",
                          "The premises were checked immediately before every send and held then, and no "
                          "answer arrived after the send deadline plus the settle margin." + later,
                          None if at_recovery else True))
    else:
        out.append(Answer("P4", "Did its assumptions hold?", "No",
                          "A premise had changed when a send went out, or an answer arrived too late; see "
                          "the problems below.", False))
    key = f" with key {b.get('key_id')}" if b.get("key_id") else " (entries are unsigned)"
    if v["tamper_evident"] and v["valid"]:
        out.append(Answer("P5", "Is the record intact?", "Yes",
                          f"Every entry's hash recomputes, each links to the one before it, and the signatures "
                          f"verify{key}. Any change would show.", True))
    elif v.get("unsigned") and len(v["problems"]) == v["unsigned"] and v["valid"]:
        out.append(Answer("P5", "Is the record intact?", "Cannot tell",
                          f"{v['unsigned']} of its entries carry no signature although the bundle names key "
                          f"{b.get('key_id')}: they were written before the key existed or by a worker started "
                          f"without it (or the signatures were removed). Their hashes and links recompute, but "
                          f"an unsigned chain can be recomputed by anyone who can write the journal.", False))
    else:
        out.append(Answer("P5", "Is the record intact?", "No: tampering detected",
                          "The journal does not match its hashes, chain links or signatures; see the problems "
                          "below. Do not rely on this receipt.", False))
    return out


def _chain(entries: list, problems: list[str]) -> list[ChainEntry]:
    by_entry: dict[int, list[str]] = {}
    for p in problems:
        m = re.match(r"entry (\d+)\b", p)
        if m:
            by_entry.setdefault(int(m.group(1)), []).append(p)
    chain = []
    for i, body in enumerate(entries, start=1):
        try:
            e = json.loads(body)
        except ValueError:
            e = None
        if not isinstance(e, dict):
            chain.append(ChainEntry(i, "(unreadable)", None, None, "", None, False, str(body)[:500],
                                    by_entry.get(i, [])))
            continue
        ts = e.get("ts")
        at = dt.datetime.fromtimestamp(ts, dt.UTC) if isinstance(ts, (int, float)) else None
        rest = {k: v for k, v in e.items() if k not in ("kind", "effect_id", "ts", "via", "hash", "prev", "sig")}
        chain.append(ChainEntry(i, str(e.get("kind")), at, e.get("via"), str(e.get("hash") or ""), e.get("prev"),
                                bool(e.get("sig")), json.dumps(rest, sort_keys=True, ensure_ascii=False),
                                by_entry.get(i, [])))
    return chain


def receipt(effect_id: str) -> Receipt:
    """The receipt of an effect: its bundle (``ilr.receipts.bundle``), ``verify()``'s result, the
    answers to P1..P5 in words and the chain of entries.

    Raises:
        EffectNotFound: unknown effect id.
    """
    with db.connect(application_name="approvals-receipt") as conn:
        try:
            b = receipts.bundle(conn, effect_id)
        except LookupError:
            raise EffectNotFound(effect_id) from None
    v = receipts.verify(b)
    return Receipt(effect_id, b, v, _answers(v, b), _chain(b.get("entries") or [], v.get("problems") or []))


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
        tail = (f"oldest active {self.oldest_active['id']} ({self.oldest_active['status']}, since "
                f"{self.oldest_active['created_at']:%Y-%m-%d %H:%M:%S %Z})" if self.oldest_active else "drained")
        if self.unserved:
            tail += f"; due, no live worker serves {self.label}"
        return "; ".join(parts) + f"; {tail}."


def drain_report(name: str, version: str | None = None) -> DrainReport:
    """Counts of a deployment's workflows by (name, version, status), its oldest active one, its
    live workers and its due work (``version`` None: every version of ``name``)."""
    qs = Workflow.objects.filter(name=name)
    live = live_workers().filter(name=name)
    if version is not None:
        qs = qs.filter(version=version)
        live = live.filter(version=version)
    counts = list(qs.values("name", "version", "status").annotate(n=Count("id")).order_by("name", "version", "status"))
    oldest = qs.filter(status__in=ACTIVE).order_by("created_at", "id").values("id", "status", "created_at").first()
    workers = sorted(set(live.values_list("worker_id", flat=True)))
    return DrainReport(name, version, counts, oldest, workers, qs.filter(due_q()).count())


def deployments() -> list[dict]:
    """Every deployment, newest first, with its drain report."""
    rows = []
    for d in Deployment.objects.order_by("name", "-created_at", "-version"):
        rows.append({"deployment": d, "report": drain_report(d.name, d.version)})
    return rows
