"""The EffectTarget protocol (docs/protocol.md §6.9) and the target registry.

A target is any object with ``tier`` and ``apply(effect_id, payload)``; everything else is read
with getattr defaults. Targets registered here are checked when a worker starts (check_target) and
are what ``rt.recover_orphans`` and the review UI use to re-read premises.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

from ilr._errors import InvalidInput, TargetMisconfigured
from ilr._retry import RetryPolicy

DEDUP_MARGIN = 600.0
"""Seconds: a tier-1 effect older than dedup_window - DEDUP_MARGIN is recovered as tier 2 (when
queryable) or tier 3 (docs/protocol.md §6.5). Safe only while DEDUP_MARGIN > send_timeout +
settle_margin: a resend authorized just inside the window may be processed that much later (A2)."""

DEFAULTS = {
    "send_timeout": 35.0,
    "settle_margin": 10.0,
    "premise_max_age": 5.0,
    "dedup_window": math.inf,
    "lookup_after": 3.0,
}

RESEND_POLICY = RetryPolicy()
"""The default resend policy of a target (Temporal's defaults: 1 s, x2, cap 100 s, unlimited)."""


@runtime_checkable
class EffectTarget(Protocol):
    """What ``ctx.effect`` needs of a target.

    Required: ``tier`` (1: the target dedupes an idempotency key within dedup_window; 2: it
    answers ``query`` truthfully once A2's bound passed; 3: nothing can be learned after a
    send) and ``apply(effect_id, payload) -> dict`` (raise TargetRejected for a definite no,
    anything else for an unknown outcome). An apply that also takes a ``timeout`` keyword gets
    the seconds left before the send's local deadline, a little less than the watchdog's, so a
    slow answer ends the send (unknown outcome) rather than the worker.

    Optional, read with getattr defaults: ``name`` (class name), ``action`` (the grant action
    it needs; default "refund"), ``send_timeout`` (35 s), ``settle_margin`` (10 s),
    ``premise_max_age`` (5 s), ``queryable`` (tier == 2), ``dedup_window`` (inf s),
    ``query(effect_id, payload) -> dict | None``, ``validate_premises(premises, effect_id) ->
    [sentence]``, ``capture(...) -> premises``; ``amount_field`` (the payload key holding
    integer cents; "amount": the amount the two-person rule, a grant's max_cents and the review
    UI read, ``ilr.amounts``); and, for the review UI only, ``currency`` ("USD") and
    ``reference_field`` (the key of apply's answer holding the provider's reference; the first
    of "reference", "id", "reference_id").

    Recovery resends (docs/protocol.md §6.5): ``resend_policy`` (a RetryPolicy; default
    Temporal's, 1 s, x2, cap 100 s, unlimited; its ``max_attempts`` counts every send, the first
    included) spaces them, never closer than send_timeout + settle_margin; ``lookup_after``
    (3) unanswered sends in a row, or two sends answered with the same error, make a
    queryable target be looked up before the next resend. An apply that raises
    ``SendInProgress`` says the key's first request is still being processed: wait and resend.
    """

    tier: int

    def apply(self, effect_id: str, payload: Any) -> Any: ...


def attr(target: Any, name: str) -> Any:
    """The target's attribute ``name`` with its default (docs/protocol.md §6.9)."""
    if name == "queryable":
        value = getattr(target, "queryable", None)
        return (target.tier == 2) if value is None else bool(value)
    if name == "name":
        return getattr(target, "name", None) or type(target).__name__
    if name == "action":
        return getattr(target, "action", None) or "refund"
    if name == "resend_policy":
        policy = getattr(target, "resend_policy", None)
        return RESEND_POLICY if policy is None else policy
    return float(getattr(target, name, DEFAULTS[name]))


def check_is_target(target: Any, field: str = "target") -> Any:
    """``target`` as an effect target: a ``tier`` of 1, 2 or 3 and a callable ``apply``.

    Raises:
        InvalidInput: naming ``field`` and what is missing.
    """
    if isinstance(getattr(target, "tier", None), bool) or getattr(target, "tier", None) not in (1, 2, 3):
        raise InvalidInput(
            field,
            f"must be an effect target with a tier of 1, 2 or 3, got {type(target).__name__} "
            f"with tier {getattr(target, 'tier', None)!r}",
        )
    if not callable(getattr(target, "apply", None)):
        raise InvalidInput(
            field, f"must be an effect target with apply(effect_id, payload); {type(target).__name__} has none"
        )
    return target


def check_target(target: Any) -> None:
    """Refuse a tier-1 target with DEDUP_MARGIN <= send_timeout + settle_margin.

    Past dedup_window - DEDUP_MARGIN recovery stops trusting the key (docs/protocol.md §6.5); a
    resend authorized just before that point can still be processed send_timeout + settle_margin
    later (A2), so the margin must exceed that interval or a pruned key turns the resend into a
    second refund.

    Raises:
        TargetMisconfigured: naming the three numbers.
    """
    if getattr(target, "tier", None) not in (1, 2, 3):
        raise TargetMisconfigured(f"target {attr(target, 'name')}: tier must be 1, 2 or 3")
    if not isinstance(attr(target, "resend_policy"), RetryPolicy):
        raise TargetMisconfigured(f"target {attr(target, 'name')}: resend_policy must be an ilr.RetryPolicy or None")
    lookup_after = attr(target, "lookup_after")
    if not (lookup_after >= 1 and lookup_after == int(lookup_after)):
        raise TargetMisconfigured(
            f"target {attr(target, 'name')}: lookup_after must be a whole number of sends, 1 or more; "
            f"got {lookup_after:g}"
        )
    if not callable(getattr(target, "apply", None)):
        raise TargetMisconfigured(f"target {attr(target, 'name')}: an effect target needs apply(effect_id, payload)")
    if target.tier == 1:
        send_timeout, settle = attr(target, "send_timeout"), attr(target, "settle_margin")
        if DEDUP_MARGIN <= send_timeout + settle:
            raise TargetMisconfigured(
                f"target {attr(target, 'name')}: tier 1 needs DEDUP_MARGIN ({DEDUP_MARGIN:g} s) > send_timeout "
                f"({send_timeout:g} s) + settle_margin ({settle:g} s); a resend could outlive the idempotency key"
            )


_TARGETS: dict[str, Any] = {}


def register_target(target: Any, *, check: bool = True) -> Any:
    """Register a target by name. Returns it.

    Args:
        check: run check_target now; with False the check waits for worker start, which
            refuses to run with the message.
    """
    if check:
        check_target(target)
    _TARGETS[attr(target, "name")] = target
    return target


def registered_targets() -> dict[str, Any]:
    """Every registered target by name: a copy, so the caller cannot change the registry."""
    return dict(_TARGETS)


def get_target(name: str) -> Any | None:
    """The target registered under ``name``, or None when no target has that name."""
    return _TARGETS.get(name)
