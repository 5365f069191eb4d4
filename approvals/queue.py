"""Reads of approval requests (``ilr.approval_requests``) for the review UI and the admin.

A request is shown whatever its workflow and target: its one-line summary, the payload keyed
exactly (keys that read alike flagged), the amount the rules read as money (the target's
``amount_field`` and currency; ``ilr.amounts``), the
decision it cites (the model and its reasoning), the premises it was captured with and what a
re-check through the registered target says now, the approvers so far and the expiry. Premises
are re-checked with the target's own ``validate_premises`` (the check the runtime makes before
sending), found by name in the target registry, with a timeout, concurrently for a page.

A request made by an agent (``ilr.agents``: its decision is a turn ``<agent>:turn:<t>``) also
shows the conversation that led to it (``approvals.conversation``). How keys, money and durations
are shown is ``approvals.display``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from django.core.paginator import Page, Paginator
from django.utils import timezone

from approvals import conf
from approvals.conversation import Turn, conversations, response_text
from approvals.display import Field, duration_words, labelled, money
from ilr import InvalidInput, approver_identity, effect_id_for, get_target, payload_amount
from ilr.models import ApprovalRequest, Effect, Step

QUEUE_PAGE_SIZE = 20
# One pool for premise re-checks: a target that never answers holds a thread, not a request.
_POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="approvals-premises")


@dataclass
class PremiseCheck:
    """The premises a request was captured with, and what a re-check says now.

    Attributes:
        seen: {name: value} when the decision was made.
        changes: the target's sentences for each premise that no longer holds ([] when all hold).
        checked: True when the target answered the re-check.
        error: why the re-check could not run (no registered target, no check, no answer).
    """

    seen: dict = field(default_factory=dict)
    changes: list[str] = field(default_factory=list)
    checked: bool = False
    error: str | None = None

    @property
    def changed(self) -> bool:
        """True when the re-check found a premise that no longer holds."""
        return bool(self.changes)


@dataclass
class RequestCard:
    """An approval request as the queue and the case page show it.

    ``amount`` is the request's amount as the rules read it (``amount_cents``, written at
    request time by ``ilr.payload_amount``: the two-person rule's and the grant cap's
    figure), in money; the Approve button shows it. ``amount_note`` says when this page cannot
    show which payload key it came from.
    """

    request: ApprovalRequest
    fields: list[Field]
    amount: str | None
    premises: PremiseCheck
    decision: dict
    effect: Effect | None
    conversation: list[Turn] = field(default_factory=list)
    """An agent's turns up to the one that made this request's call ([] for other workflows)."""
    amount_note: str | None = None

    @property
    def approvers(self) -> list[str]:
        """Who approved so far, in order."""
        return [a["by"] for a in self.request.approvals or []]

    def approved_by(self, username: str) -> bool:
        """True when ``username`` is one of the approvers so far, compared as identities
        (``ilr.approver_identity``: the UI's user and the API's ``by`` agree)."""
        try:
            me = approver_identity(username)
        except InvalidInput:
            return username in self.approvers
        return any(_identity_or_raw(a) == me for a in self.approvers)

    @property
    def ambiguous_keys(self) -> bool:
        """True when two keys of the payload read alike (``Field.ambiguous_with``)."""
        return any(f.ambiguous_with for f in self.fields)

    @property
    def needs_two(self) -> bool:
        """True when the two-person rule applies to this request."""
        return self.request.approvals_needed > 1

    @property
    def pending(self) -> bool:
        """True while it can still be approved or rejected (pending and not expired)."""
        return self.request.status == "pending" and self.request.expires_at > timezone.now()

    @property
    def expires_in(self) -> str:
        """The time left before it expires, in words ("expired" once past)."""
        return duration_words((self.request.expires_at - timezone.now()).total_seconds())

    @property
    def outcome(self) -> str:
        """The request's decision in words."""
        r = self.request
        if r.status == "approved":
            return f"approved by {', '.join(self.approvers)}"
        if r.status == "rejected":
            return f"rejected by {r.decided_by}: {r.reason}"
        if r.status == "expired":
            return "expired with no decision"
        if r.status == "cancelled":
            return "cancelled with its workflow"
        if not self.pending:
            return "expired; the workflow has not read it yet"
        return "waiting for a second approver" if self.approvers else "waiting for approval"


def _identity_or_raw(name: Any) -> Any:
    try:
        return approver_identity(name)
    except InvalidInput:
        return name


def _fields(request: ApprovalRequest) -> tuple[list[Field], str | None, str | None]:
    """The payload as fields keyed exactly (``labelled``), the amount the rules read (the
    request's ``amount_cents``) in money, and a note when this page cannot tie that amount to a
    payload key.

    The key is the target's ``amount_field`` (``ilr.payload_amount``, the definition
    the two-person rule and the grant cap used when the request was written); currency: the
    target's ``currency``, default "USD". Only that key's value is shown as money, and only when
    it is the figure the rules read.
    """
    target = get_target(request.target)
    currency = getattr(target, "currency", "USD")
    payload = request.payload if isinstance(request.payload, dict) else {"value": request.payload}
    out = labelled(payload)
    try:
        key, cents = payload_amount(target, request.payload)
    except InvalidInput:
        key, cents = None, None
    ruled = request.amount_cents
    note = None
    for f in out:
        if f.name == key and cents is not None and cents == ruled:
            f.money = money(cents, currency)
    if ruled is not None and (cents != ruled):
        note = (
            f"The rules read {money(ruled, currency)} from this request; this page cannot show which key holds "
            f"it (target {request.target!r} is not registered in this process, or its amount_field changed)."
        )
    return out, money(ruled, currency), note


def _start_check(request: ApprovalRequest):
    """Start the re-check of a request's premises through its registered target.

    Returns:
        (PremiseCheck, Future or None): the check so far, and the running call of the target's
        ``validate_premises`` (None when it cannot run; the check's ``error`` says why).
    """
    seen = request.premises if isinstance(request.premises, dict) else {}
    result = PremiseCheck(seen=dict(seen))
    if request.premises is None:
        result.error = "the request recorded no premises"
        return result, None
    target = get_target(request.target)
    if target is None:
        result.error = (
            f"target {request.target!r} is not registered in this process "
            f"(ilr.register_target), so the premises cannot be re-checked here"
        )
        return result, None
    check = getattr(target, "validate_premises", None)
    if not callable(check):
        result.error = f"target {request.target!r} has no validate_premises, so the premises cannot be re-checked"
        return result, None
    return result, _POOL.submit(check, request.premises, effect_id_for({"request_id": request.effect_key}))


def _finish_check(result: PremiseCheck, future, deadline: float) -> PremiseCheck:
    """Wait for the re-check until ``deadline`` (monotonic seconds) and record what it said."""
    if future is None:
        return result
    try:
        result.changes = [str(s) for s in future.result(timeout=max(0.0, deadline - time.monotonic())) or []]
        result.checked = True
    except FutureTimeout:
        result.error = f"the target did not answer within {conf.settings.PREMISE_TIMEOUT} s"
    except Exception as exc:  # noqa: BLE001 - any failure to read is shown, never raised
        result.error = f"the target's check raised {type(exc).__name__}: {exc}"[:300]
    return result


def _decisions(requests: list[ApprovalRequest]) -> dict[str, dict]:
    """The decide step each request cites ({"model", "reasoning"}), in one query."""
    # Only the request's own workflow's decide step (rows written before ilr refused others).
    refs = {
        r.id: r.decision
        for r in requests
        if isinstance(r.decision, dict)
        and r.decision.get("seq") is not None
        and r.decision.get("workflow_id", r.workflow_id) == r.workflow_id
    }
    steps = {
        (s.workflow_id, s.seq): s
        for s in Step.objects.filter(workflow_id__in={d.get("workflow_id") for d in refs.values()}, kind="decide")
    }
    out = {}
    for rid, ref in refs.items():
        step = steps.get((ref.get("workflow_id"), ref.get("seq")))
        output = step.output if step is not None and isinstance(step.output, dict) else {}
        response = output.get("response") if isinstance(output.get("response"), dict) else {}
        out[rid] = {
            "name": step.name if step else None,
            "model": response.get("model") or output.get("model"),
            "reasoning": response.get("reasoning") or response_text(response),
            "at": step.created_at if step else None,
        }
    return out


def cards(requests: list[ApprovalRequest], recheck: bool = True) -> list[RequestCard]:
    """Cards for requests; pending ones get their premises re-checked (concurrently)."""
    decisions = _decisions(requests)
    turns = conversations(requests)
    keyed = {}
    for r in requests:
        keyed.setdefault(r.workflow_id, set()).add(effect_id_for({"request_id": r.effect_key}))
    effects = {e.effect_id: e for e in Effect.objects.filter(effect_id__in={e for ids in keyed.values() for e in ids})}
    started = {r.id: _start_check(r) for r in requests if recheck and r.status == "pending"}
    deadline = time.monotonic() + float(conf.settings.PREMISE_TIMEOUT)
    checks = {rid: _finish_check(result, future, deadline) for rid, (result, future) in started.items()}
    out = []
    for r in requests:
        fields, amount, note = _fields(r)
        premises = checks.get(r.id) or PremiseCheck(seen=dict(r.premises) if isinstance(r.premises, dict) else {})
        out.append(
            RequestCard(
                r,
                fields,
                amount,
                premises,
                decisions.get(r.id, {}),
                effects.get(effect_id_for({"request_id": r.effect_key})),
                turns.get(r.id, []),
                note,
            )
        )
    return out


def pending_requests():
    """Requests still waiting for a decision (pending, not expired), oldest first."""
    return (
        ApprovalRequest.objects.filter(status="pending", expires_at__gt=timezone.now())
        .select_related("workflow", "grant")
        .order_by("requested_at", "id")
    )


def approval_queue(page: Any = 1, per_page: int = QUEUE_PAGE_SIZE) -> tuple[Page, list[RequestCard]]:
    """One page of the approval queue (oldest first), with premises re-checked.

    Args:
        page: a page number (bad values give the first or last page).
    """
    current = Paginator(pending_requests(), per_page).get_page(page)
    return current, cards(list(current.object_list))


def requests_of(workflow_id: str) -> list[RequestCard]:
    """Every approval request of a workflow, oldest first (pending ones re-checked)."""
    return cards(
        list(
            ApprovalRequest.objects.filter(workflow_id=workflow_id)
            .select_related("workflow", "grant")
            .order_by("requested_at", "id")
        )
    )


def request_card(request_id: str) -> RequestCard | None:
    """One request's card, or None for an unknown id."""
    r = ApprovalRequest.objects.filter(id=request_id).select_related("workflow", "grant").first()
    return cards([r])[0] if r is not None else None
