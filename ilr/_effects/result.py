"""The outcome of a gated effect: EffectResult and its statuses (docs/protocol.md §6.1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATUSES = (
    "COMMITTED",
    "COMMITTED_BY_RETRY",
    "COMMITTED_ON_QUERY",
    "REAPPLIED_AFTER_QUERY",
    "DUPLICATE_IGNORED",
    "AMBIGUOUS",
    "REFUSED:conflicting_payload",
    "REFUSED:cancelled",
    "REFUSED:lease",
    "REFUSED:stale_premise",
    "REFUSED:lease_at_recovery",
    "REFUSED:stale_premise_at_recovery",
    "REFUSED:target",
    "REFUSED:resends_exhausted",
)
"""EffectResult statuses (docs/protocol.md §6.1). There is no in-flight status: the workflow
suspends instead."""


@dataclass(frozen=True)
class EffectResult:
    """The recorded outcome of ``ctx.effect``.

    Attributes:
        status: one of STATUSES.
        effect_id: ``"eff_" + sha256(canonical({"request_id": key}))[:32]``.
        result: the target's response when the effect committed by a send (or the lookup's
            answer for COMMITTED_ON_QUERY); for a refusal of a key another workflow owns,
            ``{"reason", "effect_owner", ...}`` (docs/protocol.md §6.8); else None.
    """

    status: str
    effect_id: str
    result: Any = None

    @property
    def committed(self) -> bool:
        return self.status.startswith("COMMITTED") or self.status in ("REAPPLIED_AFTER_QUERY", "DUPLICATE_IGNORED")

    @property
    def refused(self) -> bool:
        return self.status.startswith("REFUSED")
