"""Reads for the receipt page: an effect's bundle, verify()'s answers to P1..P5 in words, the chain
of entries, and the facts a reader looks for first (the case it belongs to, the amount, who
approved, the provider's reference).

Those facts come from the signed entries where the journal holds them (the payload of PROPOSED,
the target's answer in COMMITTED) and from the effect, grant and approval request rows
otherwise (the case, the approvers); the page says which is which.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from typing import Any

from approvals.cases import flag, refused
from approvals.display import money
from approvals.receipt_answers import Answer, unsigned_journal, verify_answers
from ilr import EffectNotFound, connect, get_target, receipt_bundle, verify_receipt
from ilr.models import ApprovalRequest, Effect, Grant

REFERENCE_FIELDS = ("reference", "id", "reference_id")
"""Where a target's answer holds the provider's reference when the target declares no
``reference_field``: the first of these keys present."""


@dataclass
class Facts:
    """What the receipt is about, for the page's first lines.

    ``workflow_id``, ``target`` and ``approvers`` come from the database rows (not signed);
    ``amount`` and ``reference`` from the signed PROPOSED and COMMITTED entries."""

    workflow_id: str | None = None
    target: str | None = None
    payload: Any = None
    amount: str | None = None
    grant_id: str | None = None
    approvers: list[str] = field(default_factory=list)
    request_id: str | None = None
    reference: str | None = None
    committed_at: float | None = None
    refused: bool = False
    """True when the effect stands refused (``approvals.cases.refused``)."""


@dataclass
class ChainEntry:
    """One journal entry of a receipt, parsed for display."""

    number: int
    kind: str
    at: dt.datetime | None
    via: str | None
    hash: str
    prev: str | None
    signed: bool
    fields: str
    problems: list[str]
    parsed: dict | None = field(default=None, repr=False)
    """The entry as sealed, parsed (None when unreadable), for ``facts``."""


@dataclass
class Receipt:
    """A receipt bundle, verify()'s result and its answers."""

    effect_id: str
    bundle: dict
    verdict: dict
    answers: list[Answer]
    chain: list[ChainEntry]
    facts: Facts = field(default_factory=Facts)

    @property
    def truncated(self) -> str | None:
        """verify()'s truncation finding ("truncated: the chain ends at entry k but the effect's
        head is entry n"), or None."""
        return next((p for p in self.verdict.get("problems") or () if p.startswith("truncated:")), None)

    @property
    def unsigned_journal(self) -> bool:
        """True when nothing signs this deployment's journal: the chain is intact, no entry is
        signed, and neither the bundle nor this server knows a key. Intact as far as hashes go,
        and said so, never as tamper-evident."""
        return unsigned_journal(self.verdict, self.bundle)

    @property
    def unverifiable(self) -> bool:
        """True when the chain is intact but its signatures cannot be verified: an entry with no
        signature under a known key, a key that is not trusted, or no trusted key."""
        v = self.verdict
        return (
            bool(v.get("valid"))
            and bool(v.get("chain_intact"))
            and not v.get("tamper_evident")
            and not self.unsigned_journal
            and not str(v.get("signature", "")).startswith("unverified: the signature of")
        )

    @property
    def tampered(self) -> bool:
        """True when verify() found the journal changed, broken or cut short (not merely
        unverifiable)."""
        v = self.verdict
        return not (v.get("tamper_evident") and v.get("valid")) and not self.unverifiable and not self.unsigned_journal

    @property
    def trusted_keys(self) -> str:
        """The key ids verify() found the signatures by, for the page ("" when none)."""
        signature = str(self.verdict.get("signature") or "")
        match = re.search(r"by a trusted key \(([^)]*), from ", signature)
        return match.group(1) if match else ""

    def bundle_json(self) -> str:
        """The bundle as pretty JSON, as downloaded."""
        return json.dumps(self.bundle, indent=2, sort_keys=True, ensure_ascii=False)


def _chain(entries: list, problems: list[str]) -> list[ChainEntry]:
    by_entry: dict[int, list[str]] = {}
    for p in problems:
        m = re.match(r"entry (\d+)\b", p)
        if m:
            by_entry.setdefault(int(m.group(1)), []).append(p)
    chain = []
    for i, body in enumerate(entries, start=1):
        try:
            e = json.loads(body)
        except ValueError:
            e = None
        if not isinstance(e, dict):
            chain.append(
                ChainEntry(i, "(unreadable)", None, None, "", None, False, str(body)[:500], by_entry.get(i, []))
            )
            continue
        ts = e.get("ts")
        at = dt.datetime.fromtimestamp(ts, dt.UTC) if isinstance(ts, (int, float)) else None
        rest = {k: v for k, v in e.items() if k not in ("kind", "effect_id", "ts", "via", "hash", "prev", "sig")}
        chain.append(
            ChainEntry(
                i,
                str(e.get("kind")),
                at,
                e.get("via"),
                str(e.get("hash") or ""),
                e.get("prev"),
                bool(e.get("sig")),
                json.dumps(rest, sort_keys=True, ensure_ascii=False),
                by_entry.get(i, []),
                e,
            )
        )
    return chain


def receipt(effect_id: str) -> Receipt:
    """The receipt of an effect: its bundle (``ilr.receipt_bundle``), ``ilr.verify_receipt()``'s result, the
    answers to P1..P5 in words and the chain of entries.

    Raises:
        EffectNotFound: unknown effect id.
    """
    with connect(application_name="approvals-receipt") as conn:
        try:
            b = receipt_bundle(conn, effect_id)
        except LookupError:
            raise EffectNotFound(effect_id) from None
    v = verify_receipt(b)
    chain = _chain(b.get("entries") or [], v.get("problems") or [])
    return Receipt(effect_id, b, v, verify_answers(v, b), chain, facts(effect_id, chain))


def _reference(target: Any, result: Any) -> str | None:
    """The provider's reference in a target's answer: its ``reference_field`` when declared,
    else the first of REFERENCE_FIELDS present."""
    if not isinstance(result, dict):
        return None
    declared = getattr(target, "reference_field", None) if target is not None else None
    for name in [declared] if declared else REFERENCE_FIELDS:
        value = result.get(name)
        if value not in (None, ""):
            return str(value)
    return None


def facts(effect_id: str, chain: list[ChainEntry]) -> Facts:
    """The case, amount, approvers and provider's reference of one effect (see Facts), from its
    chain of entries (``_chain``) and the columns of its row that the bundle does not carry."""
    out = Facts()
    effect = (
        Effect.objects.filter(effect_id=effect_id)
        .only("workflow_id", "target", "grant_id", "payload")
        .annotate(refused=flag(refused()))
        .first()
    )
    parsed = [c.parsed for c in chain if c.parsed is not None]
    proposed = next((e for e in parsed if e.get("kind") == "PROPOSED"), None)
    committed = next((e for e in reversed(parsed) if e.get("kind") == "COMMITTED"), None)
    if effect is not None:
        out.workflow_id, out.target, out.grant_id = effect.workflow_id, effect.target, effect.grant_id
        out.refused = effect.refused
    target = get_target(out.target) if out.target else None
    out.payload = proposed.get("effect") if proposed else (effect.payload if effect is not None else None)
    if isinstance(out.payload, dict):
        amount_field = getattr(target, "amount_field", "amount")
        out.amount = money(out.payload.get(amount_field), getattr(target, "currency", "USD"))
    if proposed and isinstance(proposed.get("lease"), str):
        out.grant_id = proposed["lease"]
    if committed is not None:
        out.reference = _reference(target, committed.get("result"))
        out.committed_at = committed.get("ts")
    if out.grant_id:
        request = ApprovalRequest.objects.filter(grant_id=out.grant_id).first()
        if request is not None:
            out.request_id = request.id
            out.approvers = [a["by"] for a in request.approvals or []]
        else:
            grant = Grant.objects.filter(id=out.grant_id).first()
            out.approvers = [grant.granted_by] if grant is not None else []
    return out
