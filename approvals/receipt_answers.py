"""verify()'s answers to P1..P5 for the receipt page, in words (``approvals.receipt_page`` builds the
page around them): each property, whether it holds, and what the chain and the refusals say about
it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Answer:
    """verify()'s answer to one of P1..P5, in words."""

    code: str
    question: str
    verdict: str
    explanation: str
    good: bool | None


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


def unsigned_journal(v: dict, b: dict) -> bool:
    """True when nothing signs the journal (see ``Receipt.unsigned_journal``)."""
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


def verify_answers(v: dict, b: dict) -> list[Answer]:
    """verify()'s result ``v`` for the bundle ``b`` as answers to P1..P5, in words."""
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
    elif unsigned_journal(v, b):
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
