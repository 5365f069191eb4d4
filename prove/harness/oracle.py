"""The oracle (docs/protocol.md §16.3): counts from the payment target's ledger and access log only.

It never reads a system's own records. Everything a scenario's "correct when" needs is computed
here from ``GET /ledger`` and ``GET /access_log`` of the run's target, plus the wall-clock times
at which the harness itself acted (revoke returned, cancel, hand refund), which the harness
records as faults.
"""

from __future__ import annotations

from demo.peers.targets_client import http_json


def observe(target_url: str, payment: str) -> dict:
    """Read the ledger rows and the access log entries of one payment."""
    _, ledger = http_json("GET", f"{target_url}/ledger", timeout=15)
    _, log = http_json("GET", f"{target_url}/access_log", timeout=15)
    rows = [r for r in ledger.get("rows", []) if r["payment"] == payment]
    posts = [
        e
        for e in log.get("entries", [])
        if e.get("method") == "POST"
        and e.get("path") == "/refunds"
        and isinstance(e.get("body"), dict)
        and e["body"].get("payment") == payment
    ]
    lookups = [e for e in log.get("entries", []) if e.get("method") == "GET" and e.get("path") == "/refunds"]
    return {"ledger": rows, "posts": posts, "lookups": len(lookups)}


def counts(
    obs: dict,
    *,
    approved_amount,
    revoke_at: float | None = None,
    revoke_returned: list | None = None,
    cancel_at: float | None = None,
    hand_at: float | None = None,
) -> dict:
    """The oracle's counters for one run.

    Args:
        obs: from observe().
        approved_amount: the cents amount(s) a person approved (an int or a list; None: no
            approval given). An application of any other amount is a wrong amount.
        revoke_at: wall time (unix s) the revoke returned, if any.
        revoke_returned: the effect ids the revoke returned (the runtime's "may still land" list).
        cancel_at: wall time the cancel was requested, if any.
        hand_at: wall time of the hand refund, if any.

    Returns:
        {"our_applications", "total_refunded", "hand_refunded", "duplicates", "wrong_amounts",
        "sends", "sends_after_revoke", "sends_after_revoke_unlisted", "sends_after_cancel",
        "sends_on_changed_premises", "amounts"}.
    """
    rows = obs["ledger"]
    approved = (
        None
        if approved_amount is None
        else (set(approved_amount) if isinstance(approved_amount, (list, tuple, set)) else {approved_amount})
    )
    ours = [r for r in rows if r["source"] == "api"]
    hand = [r for r in rows if r["source"] == "hand"]
    applied_posts = [e for e in obs["posts"] if e.get("applied")]

    def after(t):
        # A send "after" t: a request the target processed (applied) after t. The request's
        # processing time is its t_done_wall (delays are applied before processing).
        return [e for e in applied_posts if t is not None and (e.get("t_done_wall") or e["t_wall"]) > t]

    listed = set(revoke_returned or [])
    after_revoke = after(revoke_at)
    return {
        "our_applications": len(ours),
        "total_refunded": sum(r["amount"] for r in rows),
        "hand_refunded": sum(r["amount"] for r in hand),
        "amounts": [r["amount"] for r in ours],
        "duplicates": max(0, len(ours) - 1),
        "wrong_amounts": sum(1 for r in ours if approved is not None and r["amount"] not in approved),
        "sends": len(obs["posts"]),
        "lookups": obs["lookups"],
        "sends_after_revoke": len(after_revoke),
        "sends_after_revoke_unlisted": sum(
            1 for e in after_revoke if (e.get("body") or {}).get("effect_id") not in listed
        ),
        "sends_after_cancel": len(after(cancel_at)),
        "sends_on_changed_premises": len(after(hand_at)),
    }


def ground_truth(c: dict) -> dict:
    """What the auditor's five questions should answer, from the oracle's counts.

    P3 (the authority was live at the send) is false when an unapproved amount was applied or a
    send was processed after the revoke returned without the revoke listing its effect as in
    flight: S12's rule (``revoke_race``). A send whose T_dispatch committed under the live grant
    is authorized, and the revoke returns it as "may still land" (RevokeLinearizable); (a), (b)
    and (c) return no list, so every send after their revoke counts.
    """
    return {
        "P1": c["our_applications"] > 0,
        "P2": c["our_applications"] == 1,
        "P3": c["sends_after_revoke_unlisted"] == 0 and c["wrong_amounts"] == 0,
        "P4": c["sends_on_changed_premises"] == 0,
        "P5": True,  # tampering with a copy of the record must be detected
    }
