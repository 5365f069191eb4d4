"""A person's attestation of an AMBIGUOUS effect: a signed RECONCILED journal entry
(docs/protocol.md §6.1 and §9, docs/security.md).

The runtime could not learn whether the effect landed; a person who checked the target's
records says what they found. The statement is appended to the effect's chain under the effect
row lock, sealed and signed like every entry, so who attested what, and when, is part of the
record ``verify`` checks; the effect row's ``reconciled`` keeps a copy for the lists that read
rows (``rt.ambiguous``, the admin), which ``verify`` compares with the entry. The state stays
``ambiguous``: a reconcile never changes what the runtime knew.
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr._errors import AlreadyReconciled, EffectNotFound, InvalidInput
from ilr._journal import journal
from ilr._queries.effects import RECONCILE_IN_LOCK_EFFECTS, RECONCILE_IN_UPDATE_EFFECTS

MAX_EVIDENCE_CHARS = 4000
"""Characters of the evidence as canonical JSON: a ledger reference, a ticket, a URL, a short
note. An attestation is recorded once and never replaced, so a larger value is refused rather
than kept for good."""


def reconcile_in(conn, effect_id: str, evidence: Any, *, by: str, applied: bool | None) -> dict:
    """Attest what happened to an AMBIGUOUS effect, as a signed RECONCILED entry.

    Runs inside the caller's transaction: locks the effect row, appends RECONCILED (``who``: the
    ``by`` given, ``applied``, ``evidence``; its ``ts`` is this transaction's ``now()``; an
    entry's ``by`` names a writing claim elsewhere, so the person is ``who``) and copies it to
    the row's ``reconciled`` (as ``by``). An attestation is recorded once: a second reconcile of the same
    effect is refused (the first person's record is never replaced), naming who reconciled it
    and when; the unique index one_reconcile refuses a second entry as well.

    Args:
        conn: a psycopg connection inside the caller's transaction.
        effect_id: the AMBIGUOUS effect.
        evidence: a non-empty string or object (a ledger reference, a ticket, a screenshot
            URL), at most MAX_EVIDENCE_CHARS characters as JSON.
        by: who attests (the person or service).
        applied: what the evidence shows: True (it landed), False (it did not), None (unsure).
            Required: the attestation cannot be changed later, so it is never defaulted.

    Returns:
        the row's reconciled object: {evidence, by, applied, at}.

    Raises:
        EffectNotFound: unknown effect id.
        AlreadyReconciled: it was reconciled already (an InvalidInput).
        InvalidInput: empty or oversized evidence; empty by; an effect_id that is not an id
            (codec.check_text); applied that is not True, False or None; the effect is not
            ambiguous. Nothing is written.
        SigningKeyUnavailable: the configured signing key file is missing or unreadable.
    """
    # check_who's answer is the identity recorded (it may normalize what was typed).
    by = codec.check_who(by)
    codec.check_text(effect_id, "effect_id")
    if applied is not None and not isinstance(applied, bool):
        raise InvalidInput("applied", f"must be True (it landed), False (it did not) or None (unsure), got {applied!r}")
    if evidence is None or (isinstance(evidence, str) and not evidence.strip()) or evidence in ({}, []):
        raise InvalidInput("evidence", "a reconcile needs evidence (what shows the effect did or did not land)")
    codec.check_plain(evidence, "evidence")
    size = len(codec.canonical(evidence))
    if size > MAX_EVIDENCE_CHARS:
        raise InvalidInput(
            "evidence",
            f"at most {MAX_EVIDENCE_CHARS} characters as JSON (a ledger reference, a ticket, a URL), got {size}; "
            "an attestation is kept for good, so link to a large document instead",
        )
    cur = conn.cursor(row_factory=dict_row)
    eff = cur.execute(RECONCILE_IN_LOCK_EFFECTS, (effect_id,)).fetchone()
    if eff is None:
        raise EffectNotFound(effect_id)
    if eff["reconciled"] is not None:
        first = codec.loads_jsonb(eff["reconciled"]) or {}
        raise AlreadyReconciled(effect_id, first.get("by"), first.get("at"))
    if eff["state"] != "ambiguous":
        raise InvalidInput("effect_id", f"effect {effect_id} is {eff['state']}, not ambiguous; nothing to reconcile")
    journal.append(
        cur, effect_id, "RECONCILED", eff["now"].timestamp(), {"who": by, "applied": applied, "evidence": evidence}
    )
    row = cur.execute(
        RECONCILE_IN_UPDATE_EFFECTS,
        (json.dumps(evidence), by, applied, effect_id),
    ).fetchone()
    return codec.loads_jsonb(row["reconciled"])
