"""Reads for the admin and the review UI: paginated, over the read-only ilr models.

A workflow row may hold ``available_at = 'infinity'`` (waiting with no timeout), which no
Python datetime can hold, so every workflow query here defers that column and reads it as text
(``workflows()``). Premises are re-read from the case's payment target with a short timeout,
concurrently for a page of cases, and shown as "unavailable" when the target does not answer.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import connection
from django.db.models import BooleanField, Case, Count, Exists, OuterRef, Q, TextField, Value, When
from django.db.models.functions import Cast, Now

from approvals import conf
from approvals.models import Approval
from ilr import db, receipts
from ilr.codec import payload_hash
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


def waiting_for_approval():
    """Workflows sleeping on signal "approve", oldest first."""
    return workflows().filter(status="sleeping", waiting__kind="signal", waiting__signal="approve") \
        .order_by("created_at", "id")


# -- proposals and premises ---------------------------------------------------------------------

@dataclass
class Proposal:
    """What a person is asked to approve: the recorded proposal and the decision behind it.

    Attributes:
        payload: the ``propose`` step's output (exactly what would be sent).
        payload_hash: sha256 of its canonical JSON (what a grant binds).
        amount: payload["amount"] in cents, when present.
        facts_seen: the premises the decision rested on (the decide step's ``premises``).
        decision: the decide step's response {"model", "amount", "reasoning", ...}.
        decided_at: when the decision was recorded.
    """

    workflow_id: str
    payload: Any
    payload_hash: str
    amount: int | None
    facts_seen: Any
    decision: dict
    decided_at: dt.datetime | None


def proposal(workflow_id: str) -> Proposal | None:
    """The latest ``propose`` step of a workflow and the decide step before it; None without one."""
    prop = Step.objects.filter(workflow_id=workflow_id, name="propose", output__isnull=False).order_by("-seq").first()
    if prop is None:
        return None
    return _proposal_from(prop, Step.objects.filter(workflow_id=workflow_id, kind="decide", seq__lt=prop.seq)
                          .order_by("-seq").first())


def _proposal_from(prop: Step, decide: Step | None) -> Proposal:
    out = decide.output if decide is not None and isinstance(decide.output, dict) else {}
    response = out.get("response") if isinstance(out.get("response"), dict) else {}
    payload = prop.output
    amount = payload.get("amount") if isinstance(payload, dict) else None
    return Proposal(
        workflow_id=prop.workflow_id,
        payload=payload,
        payload_hash=payload_hash(payload),
        amount=amount if isinstance(amount, int) and not isinstance(amount, bool) else None,
        facts_seen=out.get("premises"),
        decision={"model": response.get("model") or out.get("model"), "amount": response.get("amount"),
                  "reasoning": response.get("reasoning")},
        decided_at=decide.created_at if decide is not None else None,
    )


def _proposals(ids: list[str]) -> dict[str, Proposal]:
    """Proposals of many workflows in two queries."""
    steps: dict[str, list[Step]] = {}
    for s in Step.objects.filter(Q(name="propose") | Q(kind="decide"), workflow_id__in=ids).order_by("seq"):
        steps.setdefault(s.workflow_id, []).append(s)
    found = {}
    for wf_id, rows in steps.items():
        props = [s for s in rows if s.name == "propose" and s.output is not None]
        if props:
            decides = [s for s in rows if s.kind == "decide" and s.seq < props[-1].seq]
            found[wf_id] = _proposal_from(props[-1], decides[-1] if decides else None)
    return found


@dataclass
class PremiseRow:
    """One premise: its value when decided and now ("changed" when they differ)."""

    name: str
    seen: Any
    now: Any = None
    available: bool = False
    changed: bool = False


@dataclass
class Premises:
    """The premises of a decision beside their current values.

    Attributes:
        rows: one PremiseRow per premise the decision saw.
        error: why the current values are unavailable, or None.
    """

    rows: list[PremiseRow] = field(default_factory=list)
    error: str | None = None

    @property
    def any_changed(self) -> bool:
        """True when a current value differs from the one the decision saw."""
        return any(r.changed for r in self.rows)


def premises_now(case: Any, facts_seen: Any) -> Premises:
    """Re-read the premises of a case from its target (``prove.workflows.target_for(case)
    .capture(payment)``) with a short timeout and set them beside ``facts_seen``.

    Never raises: a target that does not answer, or a case without a target, gives rows whose
    current value is unavailable and an ``error`` sentence.
    """
    seen = facts_seen if isinstance(facts_seen, dict) else {}
    result = Premises(rows=[PremiseRow(k, v) for k, v in seen.items()])
    if not isinstance(facts_seen, dict):
        result.error = "the decision recorded no premises" if facts_seen is None else "premises are not an object"
        return result
    try:
        from prove.workflows import target_for

        target = target_for(case if isinstance(case, dict) else {})
        target.read_timeout = float(conf.settings.PREMISE_TIMEOUT)
        payment = seen.get("payment") or (case.get("payment") if isinstance(case, dict) else None)
        if payment is None:
            raise ValueError("no payment to read")
        now = target.capture(payment)
    except Exception as exc:  # noqa: BLE001 - any failure to read is shown, never raised
        result.error = f"unavailable: {type(exc).__name__}: {exc}"[:300]
        return result
    for row in result.rows:
        if row.name in now:
            row.now, row.available = now[row.name], True
            row.changed = now[row.name] != row.seen
    return result


# -- the approval queue -------------------------------------------------------------------------

@dataclass
class ApprovalCase:
    """A workflow waiting for approval, as the queue shows it."""

    workflow: Workflow
    proposal: Proposal | None
    premises: Premises
    approvers: list[str]
    decided: bool
    threshold: int

    @property
    def needs_two(self) -> bool:
        """True when the two-person rule applies to this proposal's amount."""
        return self.proposal is not None and self.proposal.amount is not None and self.proposal.amount >= self.threshold


def _cases(rows: list[Workflow], threshold: int) -> list[ApprovalCase]:
    ids = [w.id for w in rows]
    props = _proposals(ids)
    votes: dict[str, list[str]] = {}
    for a in Approval.objects.filter(workflow_id__in=ids, grant_id__isnull=True).order_by("created_at"):
        if a.workflow_id in props and a.payload_hash == props[a.workflow_id].payload_hash:
            votes.setdefault(a.workflow_id, []).append(a.username)
    decided = set(Signal.objects.filter(workflow_id__in=ids, name="approve", consumed_seq__isnull=True)
                  .values_list("workflow_id", flat=True))

    def read(w: Workflow) -> Premises:
        """The premises of one case beside their current values (runs in a pool thread)."""
        p = props.get(w.id)
        return premises_now(w.input, p.facts_seen if p else None)

    with ThreadPoolExecutor(max_workers=max(1, min(8, len(rows)))) as pool:
        premises = list(pool.map(read, rows))
    return [ApprovalCase(w, props.get(w.id), prem, votes.get(w.id, []), w.id in decided, threshold)
            for w, prem in zip(rows, premises)]


def approval_queue(page: Any = 1, per_page: int = QUEUE_PAGE_SIZE) -> tuple[Page, list[ApprovalCase]]:
    """One page of the approval queue (oldest first) and its cases with premises re-read.

    Args:
        page: a page number (bad values give the first or last page).
    """
    from approvals.services import second_approver_cents

    pager = Paginator(waiting_for_approval(), per_page)
    current = pager.get_page(page)
    return current, _cases(list(current.object_list), second_approver_cents())


def approval_case(workflow_id: str) -> ApprovalCase | None:
    """The queue entry of one workflow, or None when it does not wait for approval."""
    from approvals.services import second_approver_cents

    w = waiting_for_approval().filter(id=workflow_id).first()
    return _cases([w], second_approver_cents())[0] if w is not None else None


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
    approvals: list[Approval]


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
        approvals=list(Approval.objects.filter(workflow_id=workflow_id).order_by("created_at")),
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


def _answers(v: dict, b: dict) -> list[Answer]:
    happened, once, auth, held = v["happened"], v["happened_once"], v["authorized_when_fired"], v["assumptions_held"]
    sends = v.get("sends")
    out = []
    if happened is True:
        out.append(Answer("P1", "Did it happen?", "Yes",
                          "The target confirmed the refund: the journal holds its COMMITTED entry.", True))
    elif happened is False:
        out.append(Answer("P1", "Did it happen?", "No",
                          "It was never applied: the journal shows it refused or never sent.", True))
    else:
        out.append(Answer("P1", "Did it happen?", "Unknown",
                          "It was sent but no answer was recorded (AMBIGUOUS or still open): a person must "
                          "reconcile it against the target's ledger.", None))
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
                          "applied it twice: a person must check the target's ledger.", None))
    else:
        out.append(Answer("P2", "Did it happen exactly once?", "Unknown",
                          "Whether it happened is unknown, so how often is too.", None))
    if auth is None:
        out.append(Answer("P3", "Was it authorized when it fired?", "Not applicable", "Nothing was sent.", None))
    elif auth:
        out.append(Answer("P3", "Was it authorized when it fired?", "Yes",
                          "Every send carried a live, unrevoked, unexpired grant that covered this exact payload "
                          "and amount.", True))
    else:
        out.append(Answer("P3", "Was it authorized when it fired?", "No",
                          "A send went out without a live grant covering it; see the problems below.", False))
    if held:
        out.append(Answer("P4", "Did its assumptions hold?", "Yes",
                          "The premises were checked immediately before every send and still held, and no "
                          "answer arrived after the send deadline plus the settle margin.", True))
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
