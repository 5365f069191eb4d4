"""Approval requests: a workflow asks a person to approve one exact effect.

``ctx.request_approval`` writes the request row (a fenced statement), records the step that
names it, then waits on the request's own signal. The transaction bodies here act on the row:
``approve_request_in`` (the two-person rule is enforced here, so the API, the admin and the
review UI agree), ``reject_request_in``, and ``settle_request_in``, which the workflow runs once
its wait ends and which decides, under the row locks, what the request came to.

Why the row locks settle every race: approve and reject lock the workflow row, then the request
row (FOR UPDATE), and act only on a pending request whose ``expires_at`` is still ahead by
``clock_timestamp()`` (the time of the statement, not of a transaction that began earlier); the
workflow's settle takes the same rows in the same order (its fence locks the workflow row) and
turns a request still pending into expired (after a timeout) or cancelled. Whichever commits
first wins; the other sees a decided row and acts on it as it is, so a request is never both
approved and expired, and a workflow never misses an approval that committed.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr._amounts import is_cents, payload_amount
from ilr._errors import ApprovalRefused, ApprovalRequestNotFound, InvalidInput
from ilr._ops.grants import APPROVAL_REQUEST_SIGNAL_PREFIX, insert_payload_grant, lifetime_seconds
from ilr._queries.approvals import (
    APPROVE_REQUEST_IN_UPDATE_APPROVAL_REQUESTS,
    APPROVE_REQUEST_IN_UPDATE_APPROVAL_REQUESTS_2,
    GET_APPROVAL_REQUEST_SQL,
    LIST_APPROVAL_REQUESTS_BY_STATUS_SQL,
    LIST_APPROVAL_REQUESTS_SQL,
    LOCK_APPROVAL_REQUEST_SQL,
    OPEN_FOR_DECISION_SELECT_APPROVAL_REQUESTS,
    REJECT_REQUEST_IN_UPDATE_APPROVAL_REQUESTS,
    SETTLE_APPROVAL_REQUEST_SQL,
)
from ilr._queries.misc import APPROVE_REQUEST_IN_SELECT_SQL, OPEN_FOR_DECISION_SELECT_SQL
from ilr._queries.signals import WAKE_INSERT_SIGNALS
from ilr._queries.workflows import (
    APPROVE_REQUEST_IN_SELECT_WORKFLOWS,
    OPEN_FOR_DECISION_LOCK_WORKFLOWS,
    WAKE_UPDATE_WORKFLOWS,
)
from ilr._telemetry import hooks, tracing

STATUSES = ("pending", "approved", "rejected", "expired", "cancelled")
DECIDED = ("approved", "rejected", "expired", "cancelled")
MAX_SUMMARY = 300


@dataclass(frozen=True)
class Approval:
    """What ``ctx.request_approval`` returns when the request was approved.

    Attributes:
        request_id: the request.
        grant_id: the grant bound to the payload; pass it to ``ctx.effect(grant=...)``.
        payload: the approved payload, exactly as requested.
        facts_seen: the premises captured before the request; pass them to ``ctx.effect``.
        approved_by: the approvers, in order (two under the two-person rule).
        decided_at: ISO time of the deciding approval.
    """

    request_id: str
    grant_id: str
    payload: Any
    facts_seen: Any
    approved_by: tuple[str, ...]
    decided_at: str


def outcome_of(req: dict) -> dict:
    """The request's decision as plain JSON: what the workflow records and replays."""
    return {
        "request_id": req["id"],
        "status": req["status"],
        "grant_id": req["grant_id"],
        "approved_by": [a["by"] for a in req["approvals"] or []],
        "decided_by": req["decided_by"],
        "reason": req["reason"],
        "decided_at": req["decided_at"].isoformat() if req["decided_at"] else None,
    }


def request_id_for(workflow_id: str, seq: int) -> str:
    """The request id of the request recorded at ``seq``: the same on every re-run."""
    digest = hashlib.sha256(f"{workflow_id}\x00{seq}".encode()).hexdigest()[:24]
    return f"apr_{digest}"


def signal_name(request_id: str) -> str:
    """The signal that wakes the workflow when its request is decided."""
    return f"{APPROVAL_REQUEST_SIGNAL_PREFIX}{request_id}"


_LINES = ("Zl", "Zp")


def approver_identity(by: Any, field: str = "by") -> str:
    """The identity of an approver named ``by``: what the two-person rule compares and what is
    stored (``approvals``, ``decided_by``, the grant's ``granted_by``).

    The rule: Unicode NFKC, runs of whitespace as one space, stripped, casefolded (then NFKC
    again, as casefolding can leave a string that is not). So "alice", " Alice ", "ALICE" and
    fullwidth "ａｌｉｃｅ" are one person; a name holding a control, format (zero-width,
    bidirectional), surrogate, private-use or unassigned character is refused, as a look-alike
    of another name. The review UI passes the logged-in Django user's username through the
    same rule, so a person approving once in the UI and once through the API counts once. Two
    usernames that differ only by case are one identity here: the rule errs towards asking for
    another person.

    Raises:
        InvalidInput: naming ``field``: not a str, empty once normalized, over
            codec.MAX_TEXT_LENGTH characters, or holding such a character.
    """
    codec.check_who(by, field)
    text = unicodedata.normalize("NFKC", by)
    # Control (tab and newline too), format, surrogate, private-use, unassigned; line and
    # paragraph separators: none is part of a name a person reads.
    bad = next((ch for ch in text if unicodedata.category(ch)[0] == "C" or unicodedata.category(ch) in _LINES), None)
    if bad is not None:
        raise InvalidInput(
            field,
            f"an approver's name may not hold control, format or invisible characters "
            f"(found U+{ord(bad):04X}); give the person's plain name",
        )
    identity = unicodedata.normalize("NFKC", " ".join(text.split()).casefold())
    if not identity:
        raise InvalidInput(field, "must name the person or service acting (a non-empty string)")
    return identity


def _same_person(recorded: str, identity: str) -> bool:
    try:
        return approver_identity(recorded) == identity
    except InvalidInput:
        return recorded == identity


def two_person_threshold(target: Any, target_name: str, action: str) -> tuple[int | None, str]:
    """The two-person threshold (cents) of a request, and the rule it comes from in words.

    The project's ``ILR_TWO_PERSON_CENTS`` (a dict from action or target name to cents; the
    action's entry first), else the target's own ``two_person_cents`` attribute, else none.

    Returns:
        (cents or None, where it is set: "ILR_TWO_PERSON_CENTS['refund']" or "the target's
        two_person_cents").

    Raises:
        InvalidInput: the setting or the target's threshold is not of the rule's shape (named,
            as ``manage.py check`` names it: ilr.E002), instead of a TypeError at the comparison.
    """
    from ilr._conf import setting_problems, settings

    rules = settings.TWO_PERSON_CENTS
    problems = setting_problems("TWO_PERSON_CENTS", rules)
    if problems:
        raise InvalidInput(*problems[0])
    rules = rules or {}
    for key in (action, target_name):
        if key in rules:
            return rules[key], f"ILR_TWO_PERSON_CENTS[{key!r}]"
    own = getattr(target, "two_person_cents", None)
    if own is not None and not is_cents(own):
        raise InvalidInput(
            "two_person_cents", f"a target's two_person_cents is a non-negative integer of cents, got {own!r}"
        )
    return own, "the target's two_person_cents"


def request_amount(target: Any, target_name: str, action: str, payload: Any) -> tuple[int | None, int]:
    """The amount of a request's payload (``ilr.payload_amount``: the target's
    ``amount_field``) and how many distinct people must approve it: 2 when the amount is at or
    above the two-person threshold (``two_person_threshold``), else 1.

    Returns:
        (cents or None, approvals needed).

    Raises:
        InvalidInput: naming ``payload.<amount_field>``: the field holds something that is not
            cents, or a two-person rule applies and the amount cannot be read (missing), so the
            rule could not be checked; and as ``two_person_threshold``.
    """
    field, cents = payload_amount(target, payload)
    threshold, rule = two_person_threshold(target, target_name, action)
    if cents is None and isinstance(payload, dict) and field in payload:
        raise InvalidInput(
            f"payload.{field}",
            f"an amount is a non-negative integer of cents up to {codec.MAX_CENTS}, got {payload[field]!r} "
            f"(the target's amount_field {field!r}, which the two-person rule and the grant's cap read)",
        )
    if cents is None and threshold is not None:
        raise InvalidInput(
            f"payload.{field}",
            f"the two-person rule ({rule} = {threshold} cents) applies to this request, and the payload "
            f"has no amount under {field!r} (the target's amount_field) to check it against",
        )
    return cents, 2 if threshold is not None and cents is not None and cents >= threshold else 1


def approvals_needed(target: Any, target_name: str, action: str, amount: int | None) -> int:
    """How many distinct people must approve ``amount`` (cents): 2 at or above the two-person
    threshold (``two_person_threshold``), else 1."""
    threshold, _ = two_person_threshold(target, target_name, action)
    return 2 if threshold is not None and amount is not None and amount >= threshold else 1


def check_summary(summary: Any) -> str:
    if not isinstance(summary, str):
        raise InvalidInput("summary", f"must be a string (one line for the queue), got {type(summary).__name__}")
    if "\n" in summary or len(summary) > MAX_SUMMARY:
        raise InvalidInput("summary", f"must be one line of at most {MAX_SUMMARY} characters")
    return summary


def get_in(conn, request_id: str, *, lock: bool = False) -> dict:
    """The request row (``lock``: FOR UPDATE).

    Raises:
        ApprovalRequestNotFound: no such request.
    """
    codec.check_text(request_id, "request_id")
    cur = conn.cursor(row_factory=dict_row)
    row = cur.execute(LOCK_APPROVAL_REQUEST_SQL if lock else GET_APPROVAL_REQUEST_SQL, (request_id,)).fetchone()
    if row is None:
        raise ApprovalRequestNotFound(request_id)
    return row


def _open_for_decision(conn, cur, request_id: str) -> dict:
    """Lock the request and its workflow; refuse unless the request is pending, unexpired and its
    workflow still waits for it."""
    # The workflow row first, then the request: the order of signal_in and of the workflow's own
    # settle (its fence locks the workflow row), so neither waits on the other in a cycle.
    codec.check_text(request_id, "request_id")
    found = cur.execute(OPEN_FOR_DECISION_SELECT_APPROVAL_REQUESTS, (request_id,)).fetchone()
    if found is None:
        raise ApprovalRequestNotFound(request_id)
    wf = cur.execute(OPEN_FOR_DECISION_LOCK_WORKFLOWS, (found["workflow_id"],)).fetchone()
    req = get_in(conn, request_id, lock=True)
    if req["status"] != "pending":
        who = "with no decision" if req["decided_by"] == "$workflow" else f"by {req['decided_by']}"
        raise ApprovalRefused(request_id, req["status"], f"is {req['status']} already ({who})")
    live = cur.execute(OPEN_FOR_DECISION_SELECT_SQL, (req["expires_at"],)).fetchone()["live"]
    if not live:
        raise ApprovalRefused(request_id, "pending", f"expired at {req['expires_at']:%Y-%m-%d %H:%M:%S %Z}")
    if wf["status"] in ("completed", "failed", "cancelled", "stuck", "terminated", "continued"):
        raise ApprovalRefused(request_id, "pending", f"its workflow {req['workflow_id']} ended ({wf['status']})")
    if wf["cancel_requested_at"] is not None:
        raise ApprovalRefused(request_id, "pending", f"its workflow {req['workflow_id']} is being cancelled")
    return req


def _wake(cur, req: dict, payload: dict, by: str) -> None:
    cur.execute(
        WAKE_INSERT_SIGNALS,
        (req["workflow_id"], signal_name(req["id"]), codec.dumps(payload, "signal"), by),
    )
    cur.execute(
        WAKE_UPDATE_WORKFLOWS,
        (req["workflow_id"],),
    )


def approve_request_in(conn, request_id: str, *, by: str, expires_in: float | None = None) -> dict:
    """Approve a pending request as ``by``.

    With the request's ``approvals_needed`` reached, one transaction inserts the grant bound to
    the request's payload hash and premises (capped at its amount; expiring after the shortest
    ``expires_in`` any approver asked for, in seconds; never when none did), marks the request
    approved and wakes the workflow. Below it
    (the first of two people), the approval is recorded and the request stays pending.

    Returns:
        the request row after the change.

    Raises:
        ApprovalRequestNotFound: no such request.
        ApprovalRefused: not pending, expired, its workflow ended, or ``by`` approved it already
            (the two-person rule needs two different people: ``by`` is compared and stored as
            ``approver_identity(by)``). Nothing is written.
        InvalidInput: a ``by`` that is no identity (``approver_identity``) or a bad ``expires_in``.
    """
    by = approver_identity(by)
    seconds = lifetime_seconds(expires_in, "expires_in")
    cur = conn.cursor(row_factory=dict_row)
    req = _open_for_decision(conn, cur, request_id)
    approvals = list(req["approvals"] or [])
    # Rows written before identities were normalized hold raw names: compare their identities.
    if any(_same_person(a["by"], by) for a in approvals):
        raise ApprovalRefused(
            request_id, "pending", f"{by} approved it already; the two-person rule needs a second, different person"
        )
    now = cur.execute(APPROVE_REQUEST_IN_SELECT_SQL).fetchone()["t"]
    approval = {"by": by, "at": now.isoformat(), "expires_in": seconds}
    if hooks.on:  # the approver's request span, linked from the approval's span (docs/guides/telemetry.md)
        traceparent = tracing.current_traceparent()
        if traceparent:
            approval["traceparent"] = traceparent
    approvals.append(approval)
    if len(approvals) < req["approvals_needed"]:
        cur.execute(
            APPROVE_REQUEST_IN_UPDATE_APPROVAL_REQUESTS_2,
            (codec.dumps(approvals, "approvals"), request_id),
        )
        return get_in(conn, request_id)
    # Each approver asked for a lifetime; the grant lives as long as the shortest one asked.
    lifetimes = [a["expires_in"] for a in approvals if a.get("expires_in")]
    principal = cur.execute(APPROVE_REQUEST_IN_SELECT_WORKFLOWS, (req["workflow_id"],)).fetchone()["name"]
    facts_text = codec.dumps(req["premises"], "premises")
    grant_id = insert_payload_grant(
        cur,
        principal=principal,
        action=req["action"],
        payload=req["payload"],
        max_cents=req["amount_cents"],
        facts_text=facts_text,
        by=" and ".join(a["by"] for a in approvals),
        seconds=min(lifetimes) if lifetimes else None,
    )
    cur.execute(
        APPROVE_REQUEST_IN_UPDATE_APPROVAL_REQUESTS,
        (codec.dumps(approvals, "approvals"), grant_id, by, request_id),
    )
    _wake(cur, req, {"status": "approved", "grant_id": grant_id, "by": by}, by)
    return get_in(conn, request_id)


def reject_request_in(conn, request_id: str, *, by: str, reason: str) -> dict:
    """Reject a pending request as ``by`` with ``reason`` (one line, required); wakes the
    workflow, whose ``request_approval`` returns None.

    Returns:
        the request row after the change.

    Raises:
        ApprovalRequestNotFound, ApprovalRefused: as ``approve_request_in``.
        InvalidInput: a ``by`` that is no identity (``approver_identity``), an empty ``reason``.
    """
    by = approver_identity(by)
    codec.check_text(reason, "reason", "must say why the request is rejected (a non-empty string)")
    cur = conn.cursor(row_factory=dict_row)
    req = _open_for_decision(conn, cur, request_id)
    cur.execute(
        REJECT_REQUEST_IN_UPDATE_APPROVAL_REQUESTS,
        (by, reason, request_id),
    )
    _wake(cur, req, {"status": "rejected", "by": by, "reason": reason}, by)
    return get_in(conn, request_id)


def settle_request_in(conn, run, request_id: str, ended: str | None) -> dict:
    """What the request came to, once its workflow's wait ended: ``ended`` is "expired" (the
    wait timed out) or "cancelled" (the workflow was cancelled) and turns a still-pending request
    into that status, fenced by ``run``'s claim; None reads the request as it is (a decision
    woke the wait). Autocommit: one statement, then the read.

    Returns:
        the request row.
    """
    if ended in ("expired", "cancelled"):
        conn.execute(
            SETTLE_APPROVAL_REQUEST_SQL,
            {
                "ended": ended,
                "id": request_id,
                "wf": run.workflow_id,
                "epoch": run.epoch,
                "ttl": run.lease_ttl,
                "reason": "no decision before the request expired"
                if ended == "expired"
                else "the workflow was cancelled",
            },
        )
    return get_in(conn, request_id)


def list_in(conn, status: str | None = "pending", limit: int = 200) -> list[dict]:
    """Requests with ``status`` (None: any), oldest first, at most ``limit``."""
    if status is not None and status not in STATUSES:
        raise InvalidInput("status", f"must be one of {', '.join(STATUSES)} or None, got {status!r}")
    cur = conn.cursor(row_factory=dict_row)
    sql = LIST_APPROVAL_REQUESTS_BY_STATUS_SQL if status else LIST_APPROVAL_REQUESTS_SQL
    return cur.execute(sql, (status, limit)).fetchall()
