"""Invariants of the journal and its receipts (docs/protocol.md §9, §11)."""

from __future__ import annotations

import json

from ilr._invariants.snapshot import Snapshot, violation
from ilr._journal import history, receipts


def receipt_chain_linear(s: Snapshot) -> list:
    """Per effect one chain (prev links and positions) and verify() reports the chain intact
    (signatures are not this check's: it runs with no trusted key)."""
    out = []
    for eid, bodies in s.bodies.items():
        v = receipts.verify({"effect_id": eid, "entries": bodies}, trusted_keys={})
        if not v["chain_intact"]:
            out.append(violation(effect_id=eid, problems=v["problems"]))
    return out


def receipt_complete(s: Snapshot) -> list:
    """Every effect's row agrees with its chain: its head (head_hash, head_n) is the chain's
    last entry and length, so no entry was deleted from the end, and its state is the state the
    signed entries say (``receipts.chain_state``); a RECONCILED entry's by, applied and evidence
    are the row's ``reconciled``."""
    out = []
    for eid, eff in s.effects.items():
        entries = s.journal.get(eid, [])
        last = entries[-1].get("hash") if entries else None
        if entries and (eff.get("head_hash"), eff.get("head_n")) != (last, len(entries)):
            out.append(
                violation(
                    effect_id=eid, head=[eff.get("head_hash"), eff.get("head_n")], chain_ends=[last, len(entries)]
                )
            )
        if entries and eff["state"] != history.chain_state(entries):
            out.append(violation(effect_id=eid, state=eff["state"], chain_state=history.chain_state(entries)))
        signed = history.chain_reconciled(entries)
        row = eff.get("reconciled")
        row = json.loads(row) if isinstance(row, str) else row
        if signed is not None and (
            not isinstance(row, dict) or any(row.get(k) != signed[k] for k in ("by", "applied", "evidence"))
        ):
            out.append(violation(effect_id=eid, reconciled=row, signed=signed))
    return out


def receipt_truthful(s: Snapshot) -> list:
    """verify()'s happened and happened_once match the ledger; "unknown" exactly when the
    effect is ambiguous or still dispatched (evidence: ledger)."""
    ledger = s.ledger_by_effect()
    if ledger is None:
        return []
    out = []
    for eid, bodies in s.bodies.items():
        eff = s.effects.get(eid)
        if eff is None:
            continue
        v = receipts.verify({"effect_id": eid, "entries": bodies})
        apps = len(ledger.get(eid, []))
        unknown = eff["state"] in ("ambiguous", "dispatched")
        if (
            (v["happened"] == "unknown") != unknown
            or (v["happened"] is True and apps == 0)
            or (v["happened"] is False and apps > 0)
            or (v["happened_once"] is True and apps != 1)
        ):
            out.append(
                violation(
                    effect_id=eid,
                    happened=v["happened"],
                    happened_once=v["happened_once"],
                    applications=apps,
                    state=eff["state"],
                )
            )
    return out
