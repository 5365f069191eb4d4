"""Grants, approvals, revocation and reconciliation: transaction bodies (docs/protocol.md §7).

Each ``*_in`` body runs inside the caller's transaction on any psycopg 3 connection, so Django
admin and the review UI call exactly this SQL inside ``transaction.atomic()``. Lock order:
workflow row, then effect row, then grant row (revoke takes only the grant row).
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr._amounts import payload_amount
from ilr._codec import check_workflow_id
from ilr._errors import GrantNotFound, InvalidInput, WorkflowNotFound
from ilr._queries.effects import REVOKE_IN_SELECT_EFFECTS
from ilr._queries.grants import (
    GRANT_IN_INSERT_GRANTS,
    INSERT_PAYLOAD_GRANT_INSERT_GRANTS,
    REVOKE_IN_SELECT_GRANTS,
    REVOKE_IN_UPDATE_GRANTS,
)
from ilr._queries.signals import APPROVE_IN_INSERT_SIGNALS, APPROVE_IN_SELECT_SIGNALS
from ilr._queries.workflows import APPROVE_IN_LOCK_WORKFLOWS, APPROVE_IN_UPDATE_WORKFLOWS

MAX_LIFETIME_S = 100 * 365 * 86400
"""Seconds: the longest expires_in (a hundred years); None is the way to say never."""


def lifetime_seconds(value: Any, field: str) -> float | None:
    """A grant lifetime ``value`` (seconds, or a timedelta) as float seconds; None stays None
    (never expires).

    Raises:
        InvalidInput: not a finite number in (0, MAX_LIFETIME_S] (field ``field``).
    """
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if not codec.is_seconds(value, positive=True) or value > MAX_LIFETIME_S:
        raise InvalidInput(
            field, f"must be a positive number of seconds up to {MAX_LIFETIME_S} (None: never expires), got {value!r}"
        )
    return float(value)


def _amount(payload: Any) -> int | None:
    """The raw approve path's cap: the payload's amount under the default field (it names no
    target; ``ilr.amounts``). A value there that is not cents is refused."""
    field, cents = payload_amount(None, payload)
    if cents is None and isinstance(payload, dict) and field in payload:
        codec.check_cents(payload[field], f"payload.{field}")
    return cents


def new_grant_id() -> str:
    return "grant_" + secrets.token_hex(12)


def grant_in(
    conn,
    principal: str,
    action: str,
    *,
    by: str,
    max_cents: int | None = None,
    expires_in: float | None = None,
    grant_id: str | None = None,
) -> str:
    """Insert a policy grant (no payload binding). Returns its id.

    Args:
        principal: who may act (an agent or workflow name).
        action: the action covered, e.g. "refund".
        max_cents: cap on the payload's amount (``ilr.amounts``: the target's ``amount_field``,
            default "amount", as the send's grant check reads it); None for no cap.
        expires_in: seconds from now (database clock); None never expires.

    Raises:
        InvalidInput: empty principal, action or by; a negative max_cents; a bad expiry; an id
            that exists already.
    """
    codec.check_who(principal, "principal")
    codec.check_text(action, "action", "must name the action the grant allows (a non-empty string, e.g. 'refund')")
    codec.check_who(by)
    if max_cents is not None:
        codec.check_cents(max_cents, "max_cents")
    seconds = lifetime_seconds(expires_in, "expires_in")
    grant_id = new_grant_id() if grant_id is None else codec.check_text(grant_id, "grant_id")
    cur = conn.cursor(row_factory=dict_row)
    row = cur.execute(
        GRANT_IN_INSERT_GRANTS,
        (grant_id, principal, action, max_cents, by, seconds),
    ).fetchone()
    if row is None:
        raise InvalidInput("grant_id", f"grant {grant_id!r} exists already")
    return grant_id


def insert_payload_grant(
    cur,
    *,
    principal: str,
    action: str,
    payload: Any,
    facts_text: str,
    by: str,
    seconds: float | None,
    max_cents: int | None = None,
) -> str:
    """Insert an approval: a grant bound to ``payload``'s hash and the facts seen, capped at
    ``max_cents`` (the request's amount, as ``ilr.payload_amount`` read it under the
    target's ``amount_field``; None: no cap, the hash still binds the payload), expiring
    ``seconds`` from now (database clock; None: never). Inputs are already checked. Returns the
    grant id."""
    grant_id = new_grant_id()
    cur.execute(
        INSERT_PAYLOAD_GRANT_INSERT_GRANTS,
        (grant_id, principal, action, max_cents, codec.payload_hash(payload), facts_text, by, seconds),
    )
    return grant_id


def approve_in(
    conn,
    wf_id: str,
    payload: Any,
    facts_seen: Any,
    *,
    by: str,
    expires_in: float | None = None,
    action: str = "refund",
    principal: str | None = None,
) -> str:
    """Approve the exact ``payload`` of a workflow waiting on signal "approve".

    docs/protocol.md §7. One transaction: lock the workflow row; insert a grant binding
    payload_hash and facts_seen (max_cents = the amount); insert the approve signal {grant_id,
    payload, facts_seen}; wake the workflow.

    Returns:
        the new grant id.

    Raises:
        WorkflowNotFound: unknown workflow.
        InvalidInput: the workflow is not waiting for approval, it was approved already (an
            approve signal is still unconsumed), by is empty, or the payload is not plain JSON
            or has a bad amount. Nothing is written.
    """
    check_workflow_id(wf_id)
    codec.check_who(by)
    codec.dumps(payload, "payload")  # plain JSON, and not over MAX_JSON_BYTES
    facts_text = codec.dumps(facts_seen, "facts_seen")
    _amount(payload)  # a bad amount is refused before anything is written
    seconds = lifetime_seconds(expires_in, "expires_in")
    cur = conn.cursor(row_factory=dict_row)
    wf = cur.execute(APPROVE_IN_LOCK_WORKFLOWS, (wf_id,)).fetchone()
    if wf is None:
        raise WorkflowNotFound(wf_id)
    pending = cur.execute(
        APPROVE_IN_SELECT_SIGNALS,
        (wf_id,),
    ).fetchone()
    if pending is not None:
        raise InvalidInput("workflow_id", f"workflow {wf_id} was approved already; the approval is on its way")
    waiting = codec.loads_jsonb(wf["waiting"]) or {}
    if not (wf["status"] == "sleeping" and waiting.get("kind") == "signal" and waiting.get("signal") == "approve"):
        raise InvalidInput("workflow_id", _not_waiting_for_approve(wf_id, wf["status"], waiting))
    grant_id = insert_payload_grant(
        cur,
        principal=principal or wf["name"],
        action=action,
        payload=payload,
        facts_text=facts_text,
        by=by,
        seconds=seconds,
        max_cents=_amount(payload),
    )
    signal = codec.dumps(
        {"grant_id": grant_id, "payload": payload, "facts_seen": facts_seen, "approved_by": by},
        "payload and facts_seen",
    )
    cur.execute(
        APPROVE_IN_INSERT_SIGNALS,
        (wf_id, signal, by),
    )
    cur.execute(APPROVE_IN_UPDATE_WORKFLOWS, (wf_id,))
    return grant_id


def revoke_in(conn, grant_id: str, *, by: str) -> list[str]:
    """Revoke a grant, recording when and by whom, and return exactly the effect ids that may
    still land (docs/protocol.md §7).

    The UPDATE waits for every T_dispatch or T_resolve holding the grant FOR SHARE; once it
    commits, no later one authorizes a send under it (RevokeLinearizable).

    A grant is revoked once. A second revoke is refused and changes nothing: the first
    revoked_at and revoked_by stand, and the refusal names them and the effects still
    dispatched under the grant (the list the first revoke returned, less what has resolved
    since), so a caller who lost the first answer loses nothing.

    Returns:
        effect ids in state dispatched under this grant, sorted.

    Raises:
        GrantNotFound: unknown grant id.
        InvalidInput: by is empty; grant_id is not a non-empty string; or the grant was
            revoked already (field ``grant_id``).
    """
    codec.check_who(by)
    codec.check_text(grant_id, "grant_id")
    cur = conn.cursor(row_factory=dict_row)
    # The row lock the UPDATE would take: it waits for every T_dispatch and T_resolve holding the
    # grant FOR SHARE (so the list below sees their dispatches), and two revokes of one grant
    # serialize here, so exactly one of them records itself.
    grant = cur.execute(REVOKE_IN_SELECT_GRANTS, (grant_id,)).fetchone()
    if grant is None:
        raise GrantNotFound(grant_id)
    landing = [
        r["effect_id"]
        for r in cur.execute(
            REVOKE_IN_SELECT_EFFECTS,
            (grant_id,),
        ).fetchall()
    ]
    if grant["revoked_at"] is not None:
        raise InvalidInput(
            "grant_id",
            f"grant {grant_id!r} was already revoked by {grant['revoked_by'] or 'someone'} "
            f"at {grant['revoked_at'].isoformat()}; a grant is revoked once. Nothing was "
            f"changed. Effects still dispatched under it, which may land: "
            f"{', '.join(landing) if landing else 'none'}",
        )
    cur.execute(REVOKE_IN_UPDATE_GRANTS, (by, grant_id))
    return landing


APPROVAL_REQUEST_SIGNAL_PREFIX = "approval:"
"""The prefix of the signal a workflow waits on for an approval request (the full name is
ilr._ops.approval_requests.signal_name, which imports this module)."""


def _not_waiting_for_approve(wf_id: str, status: str, waiting: dict) -> str:
    """Why ``approve_in`` refuses a workflow: what it waits on instead, in one sentence."""
    signal = waiting.get("signal") if status == "sleeping" and waiting.get("kind") == "signal" else None
    if isinstance(signal, str) and signal.startswith(APPROVAL_REQUEST_SIGNAL_PREFIX):
        request_id = signal[len(APPROVAL_REQUEST_SIGNAL_PREFIX) :]
        return (
            f"workflow {wf_id} waits on approval request {request_id!r}, not on the approve signal: "
            "approve the request (rt.approve_request or the review UI)"
        )
    if signal is not None:
        return f"workflow {wf_id} is not waiting for approval: it waits on signal {signal!r}"
    return f"workflow {wf_id} is not waiting for approval (status {status})"
