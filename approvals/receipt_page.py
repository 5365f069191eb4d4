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
from approvals.queue import money
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
class Answer:
    """verify()'s answer to one of P1..P5, in words."""

    code: str
    question: str
    verdict: str
    explanation: str
    good: bool | None


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
        return _unsigned_journal(self.verdict, self.bundle)

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


def _refusal_words(refusals: list[dict], at: str) -> str:
    """The refusals at ``at`` ("dispatch" or "recovery") in one sentence, or ""."""
    found = [r for r in refusals if r["at"] == at]
    if not found:
        return ""
    parts = []
    for r in found:
        if r["premise_violations"]:
            parts.append("the premises had changed: " + "; ".join(r["premise_violations"]))
        elif r["grant_refused"]:
            parts.append("the grant no longer covered it (revoked, expired, or for another payload)")
        else:
            parts.append(r["reason"])
    return "; ".join(parts)


def _unsigned_journal(v: dict, b: dict) -> bool:
    """See Receipt.unsigned_journal."""
    return (
        bool(v.get("valid"))
        and bool(v.get("chain_intact"))
        and not v.get("unsigned")
        and not b.get("key_id")
        and str(v.get("signature", "")).startswith("unverified: no trusted key")
        and not any('"sig":"' in str(body) for body in b.get("entries") or ())
    )


def _truncation(v: dict) -> str | None:
    return next((p for p in v.get("problems") or () if p.startswith("truncated:")), None)


def _answers(v: dict, b: dict) -> list[Answer]:
    happened, once, auth, held = v["happened"], v["happened_once"], v["authorized_when_fired"], v["assumptions_held"]
    truncated = _truncation(v)
    sends = v.get("sends")
    refusals = v.get("refusals") or []
    at_dispatch, at_recovery = _refusal_words(refusals, "dispatch"), _refusal_words(refusals, "recovery")
    out = []
    if happened is True:
        out.append(
            Answer(
                "P1",
                "Did it happen?",
                "Yes",
                "The target confirmed the effect: the journal holds its COMMITTED entry.",
                True,
            )
        )
    elif happened is False:
        why = (
            f" It was refused before it was sent: {at_dispatch}."
            if at_dispatch
            else f" Recovery refused it: {at_recovery}."
            if at_recovery
            else ""
        )
        out.append(
            Answer(
                "P1",
                "Did it happen?",
                "No",
                "It was never applied: the journal shows it refused or never sent." + why,
                True,
            )
        )
    elif truncated or not v.get("chain_intact", True):
        out.append(
            Answer(
                "P1",
                "Did it happen?",
                "Unknown",
                "Entries are missing from the end of the journal, or the effect's row says what the "
                "journal does not: what was recorded cannot be read from this receipt. Check the "
                "target's records and an earlier copy of this receipt.",
                None,
            )
        )
    else:
        out.append(
            Answer(
                "P1",
                "Did it happen?",
                "Unknown",
                "It was sent but no answer was recorded (AMBIGUOUS or still open): a person must "
                "reconcile it against the target's records.",
                None,
            )
        )
    if happened is False:
        out.append(Answer("P2", "Did it happen at most once?", "Yes", "It did not happen at all.", True))
    elif once is True:
        out.append(
            Answer(
                "P2",
                "Did it happen exactly once?",
                "Yes",
                f"One application ({sends} send{'s' if sends != 1 else ''} under one idempotency key).",
                True,
            )
        )
    elif once is False:
        out.append(
            Answer(
                "P2",
                "Did it happen exactly once?",
                "No",
                "The journal shows a second application (a late result after a reapply).",
                False,
            )
        )
    elif happened is True:
        out.append(
            Answer(
                "P2",
                "Did it happen exactly once?",
                "Unknown",
                "Recovery reapplied it after a send whose answer never came. Had that send been "
                "applied late, after the send deadline plus the settle margin (A2), the target "
                "applied it twice: a person must check the target's records.",
                None,
            )
        )
    else:
        out.append(
            Answer(
                "P2",
                "Did it happen exactly once?",
                "Unknown",
                "Whether it happened is unknown, so how often is too.",
                None,
            )
        )
    if auth is None:
        out.append(
            Answer(
                "P3",
                "Was it authorized when it fired?",
                "Not applicable: nothing was sent",
                f"Nothing was sent. The check before sending refused it: {at_dispatch}."
                if at_dispatch
                else "Nothing was sent.",
                None,
            )
        )
    elif auth:
        later = f" Recovery later refused to send it again: {at_recovery}." if at_recovery else ""
        out.append(
            Answer(
                "P3",
                "Was it authorized when it fired?",
                "Yes",
                "Every send carried a live, unrevoked, unexpired grant that covered this exact payload "
                "and amount." + later,
                True,
            )
        )
    else:
        out.append(
            Answer(
                "P3",
                "Was it authorized when it fired?",
                "No",
                "A send went out without a live grant covering it; see the problems below.",
                False,
            )
        )
    if held is None:
        out.append(
            Answer(
                "P4",
                "Did its assumptions hold?",
                "Not applicable: nothing was sent",
                f"Nothing was sent: the check before sending found that {at_dispatch}, and refused it."
                if at_dispatch
                else "Nothing was sent, so no premise was relied on.",
                None,
            )
        )
    elif held:
        later = (
            f" A later re-check at recovery found that {at_recovery}, and refused to send again: the "
            f"premises no longer hold."
            if at_recovery
            else ""
        )
        out.append(
            Answer(
                "P4",
                "Did its assumptions hold?",
                "Yes, at every send" if at_recovery else "Yes",
                "The premises were checked immediately before every send and held then, and no "
                "answer arrived after the send deadline plus the settle margin." + later,
                None if at_recovery else True,
            )
        )
    else:
        out.append(
            Answer(
                "P4",
                "Did its assumptions hold?",
                "No",
                "A premise had changed when a send went out, or an answer arrived too late; see the problems below.",
                False,
            )
        )
    signature = str(v.get("signature") or "")
    if v["tamper_evident"] and v["valid"]:
        out.append(
            Answer(
                "P5",
                "Is the record intact?",
                "Yes",
                f"Every entry's hash recomputes, each links to the one before it at its position, the "
                f"chain ends at the effect's head, and the signatures verify with a trusted key "
                f"({signature.removeprefix('verified: ')}). Any change would show, except one the "
                f"database alone cannot: the journal and the effect row rewound together to an earlier "
                f"point. Keep the downloaded bundle; a later receipt compared with it shows that.",
                True,
            )
        )
    elif truncated:
        out.append(
            Answer(
                "P5",
                "Is the record intact?",
                "No: truncated",
                f"The journal was cut short ({truncated}): its last entries were deleted from the "
                f"database. What they recorded is unknown. Do not rely on this receipt.",
                False,
            )
        )
    elif _unsigned_journal(v, b):
        out.append(
            Answer(
                "P5",
                "Is the record intact?",
                "Yes, but unsigned",
                "Every entry's hash recomputes and each links to the one before it. No key signs "
                "this journal, so someone who can write the journal could rewrite it and recompute "
                "the hashes; a signing key (manage.py ilr_keys generate) makes that show.",
                None,
            )
        )
    elif v["valid"] and v.get("chain_intact") and not signature.startswith("unverified: the signature of"):
        why = signature.removeprefix("unverified: ")
        out.append(
            Answer(
                "P5",
                "Is the record intact?",
                "Cannot tell",
                f"Its hashes and links recompute, but its signatures cannot be verified: {why}. A "
                f"chain is evidence only when a key this server trusts signed it; anyone who can "
                f"write the journal can recompute an unsigned chain or sign one with a key of their own.",
                False,
            )
        )
    else:
        out.append(
            Answer(
                "P5",
                "Is the record intact?",
                "No: tampering detected",
                "The journal does not match its hashes, chain links, positions or signatures, or the "
                "effect's row does not match its signed entries; see the problems below. Do not rely "
                "on this receipt.",
                False,
            )
        )
    return out


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
    return Receipt(effect_id, b, v, _answers(v, b), chain, facts(effect_id, chain))


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
