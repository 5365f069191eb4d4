"""What an effect's chain of entries says: its state, its sends and their checks, its reconcile
(docs/protocol.md §9). Pure functions of the entries; ``verify()`` and the invariants read them."""

from __future__ import annotations

from typing import Any

from ilr import _codec as codec

IDEMPOTENT_RESEND_VIA = "retry-idempotent"
"""COMMITTED.via of a tier-1 recovery resend under the same idempotency key, inside the target's
dedup window (status COMMITTED_BY_RETRY): the target deduplicates it (A4), so it is no new
application."""
REAPPLY_VIA = "recovery-reapply"
"""COMMITTED.via of a recovery reapply after the target's lookup found nothing (tier 2, or tier 1
past dedup_window - DEDUP_MARGIN; status REAPPLIED_AFTER_QUERY): a new application that no
idempotency key deduplicates."""
RESEND_VIAS = (IDEMPOTENT_RESEND_VIA, REAPPLY_VIA)
"""The COMMITTED vias whose entry records a send made by recovery (the rest, "first-send",
"late-commit" and "recovery-query", record no send of their own)."""


def chain_state(entries: list[dict]) -> str:
    """The effect's state as its signed entries say it (docs/protocol.md §9): proposed until a
    DISPATCHED or RESENT (dispatched); COMMITTED and AMBIGUOUS are terminal; a REFUSED while
    dispatched returns it to proposed (the resolving refusals); the other kinds leave it."""
    state = "proposed"
    for e in entries:
        kind = e.get("kind")
        if state in ("committed", "ambiguous"):
            continue
        if kind in ("DISPATCHED", "RESENT"):
            state = "dispatched"
        elif kind == "COMMITTED":
            state = "committed"
        elif kind == "AMBIGUOUS":
            state = "ambiguous"
        elif kind == "REFUSED" and state == "dispatched":
            state = "proposed"
    return state


def chain_reconciled(entries: list[dict]) -> dict | None:
    """The signed attestation of a RECONCILED entry: {by (its ``who``), applied, evidence, at (its
    ts)}, as the effect row's ``reconciled`` holds it; or None."""
    for e in entries:
        if e.get("kind") == "RECONCILED":
            return {"by": e.get("who"), "applied": e.get("applied"), "evidence": e.get("evidence"), "at": e.get("ts")}
    return None


def lease_live(snapshot: dict | None, ts: float, payload: Any) -> tuple[bool, str | None]:
    """Whether a lease snapshot authorized ``payload`` at database time ``ts`` (seconds)."""
    if not snapshot:
        return False, "no lease snapshot"
    if snapshot.get("revoked"):
        return False, f"grant {snapshot.get('grant_id')} was revoked at {snapshot['revoked']}"
    expires = snapshot.get("expires_at_ts")
    if expires is not None and expires <= ts:
        return False, f"grant {snapshot.get('grant_id')} had expired"
    max_cents = snapshot.get("max_cents")
    # The snapshot names the target's amount field when it is not "amount" (effect_rules.lease_snapshot).
    field = snapshot.get("amount_field") or "amount"
    amount = payload.get(field) if isinstance(payload, dict) else None
    if max_cents is not None and (isinstance(amount, bool) or not isinstance(amount, int) or amount > max_cents):
        return False, f"amount {amount} exceeds the grant's max_cents {max_cents}"
    bound = snapshot.get("payload_hash")
    if bound is not None and bound != codec.payload_hash(payload):
        return False, "the payload differs from the one the approval bound"
    if snapshot.get("action_matches") is False:
        return False, "the grant's action does not cover this effect"
    return True, None


def arrived_past_settle(entry: dict) -> bool:
    """A2 for a late result: the answer arrived later than send_timeout + settle_margin after
    the send's stopwatch started (measured by the sender), or, without that measure, the entry
    was written past send_deadline + settle_margin."""
    received: Any  # Any: mypy does not narrow through the all(isinstance(...)) below
    timeout: Any
    settle: Any
    received, timeout, settle = entry.get("received_in_s"), entry.get("send_timeout"), entry.get("settle_margin")
    if all(isinstance(x, (int, float)) for x in (received, timeout, settle)):
        return received > timeout + settle
    ts, deadline = entry.get("ts"), entry.get("settle_deadline")
    return isinstance(ts, (int, float)) and isinstance(deadline, (int, float)) and ts > deadline


def send_entries(entries: list[dict]) -> list[dict]:
    """The entries that record a send, one per request the runtime put on the wire: every
    DISPATCHED and every RESENT (docs/protocol.md §6.5), each carrying the checks that
    authorized it. A COMMITTED whose via is a resend records a send only in a journal written
    before RESENT existed (no RESENT precedes it since the last DISPATCHED): then it carries
    the resend's ``rechecked`` itself.
    """
    out = []
    resent_open = False
    for e in entries:
        kind = e.get("kind")
        if kind == "DISPATCHED":
            out.append(e)
            resent_open = False
        elif kind == "RESENT":
            out.append(e)
            resent_open = True
        elif kind == "COMMITTED" and e.get("via") in RESEND_VIAS and not resent_open:
            out.append(e)
    return out


def send_checks(entry: dict) -> Any:
    """The checks that accompanied the send ``entry`` records: a DISPATCHED's ``checks``, a
    resend's ``rechecked`` (None when absent)."""
    return entry.get("checks") if entry.get("kind") == "DISPATCHED" else entry.get("rechecked")
