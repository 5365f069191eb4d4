"""Registered at autodiscovery (``ilr``'s ``ready``), before ``manage.py check`` runs its checks."""

from __future__ import annotations

from ilr._effects.targets import register_target


class LedgerCredits:
    """A tier-3 target granted under the action "credit"; never sent to in these tests."""

    name = "ledger-credits"
    tier = 3
    action = "credit"

    def apply(self, effect_id: str, payload: dict) -> dict:
        """Never called: the checks only read the registry."""
        raise AssertionError("ledger-credits is never sent to")


register_target(LedgerCredits())
