"""What the refund demo runs and expects: its timeouts, the crash points it offers, the workers'
kill points for a crash (``crash_plan``) and the outcome the ledger and the receipt must show
(``expected``)."""

from __future__ import annotations

from dataclasses import dataclass

from ilr._killpoints import POINTS

# The harness timeouts (docs/protocol.md §16.1).
LEASE_TTL, SEND_TIMEOUT, SETTLE_MARGIN = 5.0, 3.0, 5.0
PAID = 10_000


UNREACHED = ("step_before_record", "step_after_record")
"""Kill points the refund workflow never reaches, so the demo does not offer them: it runs no
``ctx.step`` (its approval request's rows are written by ``ctx.request_approval``, which has no
kill point of its own). tests/faults/test_runtime_crash.py and the Prove harness cover them."""
DEMO_POINTS = tuple(p for p in POINTS if p not in UNREACHED)
"""The ``--crash`` choices (besides "none"): each one is reached and recovered from."""

RESEND_LEAD_IN = {1: "effect_after_send", 2: "effect_after_dispatch"}
"""For a kill point reached only in a recovery's resend (``resolve_after_commit``,
``resolve_after_send``): where the first worker is SIGKILLed so that the recovering worker
resends, by tier. Tier 1: after the send (the resend goes under the idempotency key); tier 2:
after T_dispatch, before any send (the lookup finds nothing, so the recovery reapplies). Tier 3
never resends after a crash, so it never reaches them."""


def crash_plan(tier: int, crash: str | None) -> list[str]:
    """The kill points of the demo's workers, in the order they are started: worker n is
    SIGKILLed at ``plan[n-1]``, and the worker after the last one recovers.

    Returns:
        [] for no crash; [crash] for a point the first worker reaches (before the approval:
        ``claimed``, ``decide_after_response``, ``wait_after_suspend``; or after it:
        ``effect_*``); [lead-in, crash] for a ``resolve_*`` point (RESEND_LEAD_IN).

    Raises:
        ValueError: not in DEMO_POINTS, or a ``resolve_*`` point at tier 3 (nothing resends).
    """
    if crash in (None, "none"):
        return []
    if crash not in DEMO_POINTS:
        raise ValueError(f"--crash: {crash!r} is not one of the demo's kill points ({', '.join(DEMO_POINTS)})")
    if crash.startswith("resolve_"):
        if tier not in RESEND_LEAD_IN:
            raise ValueError(
                f"--crash {crash} is reached only in a recovery's resend, and tier {tier} never "
                "resends after a crash (the effect becomes AMBIGUOUS); use --tier 1 or --tier 2"
            )
        return [RESEND_LEAD_IN[tier], crash]
    return [crash]


@dataclass
class Expectation:
    status: set[str]
    refunds: int
    happened: object


def expected(tier: int, crash: str | None) -> Expectation:
    """What the ledger and the receipt must show for a tier and crash point."""
    if crash in (None, "none"):
        return Expectation({"COMMITTED"}, 1, True)
    sent = crash in ("effect_after_send", "effect_after_commit", "resolve_after_send")
    if tier == 3 and crash in ("effect_after_dispatch", "effect_after_send"):
        return Expectation({"AMBIGUOUS"}, 1 if sent else 0, "unknown")
    return Expectation({"COMMITTED", "COMMITTED_BY_RETRY", "COMMITTED_ON_QUERY", "REAPPLIED_AFTER_QUERY"}, 1, True)
