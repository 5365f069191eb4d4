"""The pure rules of a gated effect: the grant check of T_dispatch and T_resolve
(docs/protocol.md §6.2, check 8) and the recovery decision (§6.5). No I/O: callers read the rows
(the grant row with GRANT_FOR_SHARE, under their locks).
"""

from __future__ import annotations

from typing import Any

# -- the grant check (docs/protocol.md §6.2, check 8) -------------------------------------------


def lease_snapshot(
    grant: dict | None, action: str, payload: Any, ph: str, amount_field: str = "amount"
) -> tuple[bool, dict | None]:
    """(allowed, snapshot) for a grant row read FOR SHARE in this transaction (docs/protocol.md
    §6.2, check 8).

    Args:
        amount_field: the target's payload key of the amount (``ilr._amounts.amount_field``, read
            once per call by the caller): ``max_cents`` caps that key's cents, the amount the
            two-person rule and the review UI read. Named in the snapshot when it is not
            "amount", so a receipt checks the same key.
    """
    if grant is None:
        return False, None
    # One dict lookup on T_dispatch's path; the rule is ilr._amounts.is_cents (an int, no bool).
    amount = payload.get(amount_field) if isinstance(payload, dict) else None
    action_matches = grant["action"] == action
    allowed = (
        grant["revoked_at"] is None
        and grant["live_now"]
        and action_matches
        and (grant["max_cents"] is None or (type(amount) is int and 0 <= amount <= grant["max_cents"]))
        and (grant["payload_hash"] is None or grant["payload_hash"] == ph)
    )
    snapshot = {
        "grant_id": grant["id"],
        "principal": grant["principal"],
        "action": grant["action"],
        "action_matches": action_matches,
        "max_cents": grant["max_cents"],
        "payload_hash": grant["payload_hash"],
        "expires_at": grant["expires_at"].isoformat() if grant["expires_at"] else None,
        "expires_at_ts": grant["expires_at"].timestamp() if grant["expires_at"] else None,
        "revoked": grant["revoked_at"].isoformat() if grant["revoked_at"] else None,
        "granted_by": grant["granted_by"],
    }
    if amount_field != "amount":
        snapshot["amount_field"] = amount_field
    return bool(allowed), snapshot


# -- the recovery decision (docs/protocol.md §6.5): one pure function ----------------------------


def effective_tier(tier: int, window_passed: bool, queryable: bool) -> int:
    """Tier 1 past dedup_window - DEDUP_MARGIN becomes tier 2 when queryable, else tier 3."""
    if tier == 1 and window_passed:
        return 2 if queryable else 3
    return tier


def needs_query(tier: int, window_passed: bool, queryable: bool, stale: bool, lookup_due: bool = False) -> bool:
    """Whether recovery must call target.query before T_resolve: at (effective) tier 2, and
    at tier 1 when a lookup exists and the re-check failed or a lookup is due (the send's
    answers repeated, went unanswered ``lookup_after`` times, or the resend policy is spent)."""
    eff = effective_tier(tier, window_passed, queryable)
    return eff == 2 or (eff == 1 and queryable and (stale or lookup_due))


def recovery_decision(
    *, tier: int, window_passed: bool, queryable: bool, stale: bool, found: bool | None, exhausted: bool = False
) -> str:
    """The recovery action for a dispatched effect whose send outcome is unknown.

    Args:
        tier: the target's tier (1, 2, 3).
        window_passed: now() - first_dispatched_at > dedup_window - DEDUP_MARGIN.
        queryable: the target has a truthful lookup.
        stale: the grant is not live or a premise changed (the re-check failed).
        found: the lookup's answer, or None when no lookup ran.
        exhausted: the target's resend policy allows no further send.

    Returns:
        "ambiguous" (AMBIGUOUS), "resend" (tier 1, COMMITTED_BY_RETRY), "commit_on_query"
        (COMMITTED_ON_QUERY), "refuse" (REFUSED:*_at_recovery, or REFUSED:target when the
        policy is spent), "reapply" (REAPPLIED_AFTER_QUERY), or "query" when a lookup is needed
        but did not run.
    """
    eff = effective_tier(tier, window_passed, queryable)
    if eff == 3:
        return "ambiguous"
    if found:
        # A lookup that ran (stale, due or at tier 2) and found the effect: it applied.
        return "commit_on_query"
    if eff == 1 and not stale and not exhausted:
        return "resend"
    if eff == 1 and not queryable:
        return "ambiguous"
    if found is None:
        return "query"
    return "refuse" if (stale or exhausted) else "reapply"
