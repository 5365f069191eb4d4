"""Receipts: the bundle of an effect's journal and ``verify()`` (docs/protocol.md §9).

``verify`` answers the auditor's five questions (docs/protocol.md §16.5) from the bundle and the
keys it trusts: P1 happened, P2 happened_once, P3 authorized_when_fired, P4 assumptions_held, P5
tamper_evident. It never reads the target or the database. What a receipt proves, to whom, and
against whom: docs/security.md.
"""

from __future__ import annotations

import json
from typing import Any, cast

from ilr._journal import keys
from ilr._journal.history import (
    REAPPLY_VIA,
    arrived_past_settle,
    chain_state,
    lease_live,
    send_checks,
    send_entries,
)
from ilr._journal.seals import compare, head_check, read_chain, row_check, signature_words, trusted_keyring
from ilr._queries.effects import BUNDLE_SQL


def bundle(conn, effect_id: str, public_key=None) -> dict:
    """The receipt bundle of ``effect_id``.

    Args:
        conn: a connection to the runtime's database (dict rows).
        effect_id: the effect.
        public_key: the key to name as the bundle's own (``key_id``, ``public_key``); default the
            current signing key's.

    Returns:
        {"effect_id", "entries": [sealed body text, ...], "head": {"hash", "n"} or None,
        "late_result", "reconciled", "sends", "state", "key_id", "public_key", "keys": {kid:
        PEM}}; head, late_result, reconciled, sends and state come from the effects row and are
        not signed (verify checks head, state, sends and reconciled against the signed entries).
        ``keys`` holds the public key of every kid the entries name that this deployment keeps
        (ilr._journal.keys.trusted_keys): a convenience for reading, never a reason to trust.

    Raises:
        LookupError: no effect has this id.
        SigningKeyUnavailable: the configured signing key file is missing or unreadable.
    """
    row = conn.execute(BUNDLE_SQL, (effect_id,)).fetchone()
    if row is None:
        raise LookupError(f"effect_id: no effect with id {effect_id!r}")
    bodies = list(row["bodies"] or [])
    public_key = public_key or keys.public_key()
    kids = set()
    for body in bodies:
        try:
            kid = json.loads(body).get("kid")
        except (ValueError, AttributeError):
            continue
        if isinstance(kid, str):
            kids.add(kid)
    known = keys.trusted_keys() if kids else {}
    return {
        "effect_id": effect_id,
        "entries": bodies,
        "head": {"hash": row["head_hash"], "n": row["head_n"]} if row["head_n"] is not None else None,
        "late_result": row["late_result"],
        "reconciled": row["reconciled"],
        "sends": row["sends"],
        "state": row["state"],
        "key_id": keys.key_id(public_key),
        "public_key": keys.public_key_pem(public_key),
        "keys": {kid: keys.public_key_pem(known[kid]) for kid in sorted(kids) if kid in known},
    }


def verify(bundle: dict, public_key=None, *, trusted_keys=None, previous: dict | None = None) -> dict:
    """Check a receipt bundle and answer P1 to P5 (docs/protocol.md §9, docs/security.md).

    Args:
        bundle: from ``bundle()`` (or a copy of it, e.g. a downloaded JSON file).
        public_key: the key(s) to trust, pinned: an Ed25519 public key or a list of them. The
            keys the bundle itself carries are never trusted for being there.
        trusted_keys: without a pinned key, the keys to trust: {kid: public key}, or a list of
            keys. Default (both None): this deployment's key directory (``keys.trusted_keys``),
            or none when it cannot be read (no Django settings, a missing key file).
        previous: a bundle of the same effect handed out earlier: this one must hold all of its
            entries, unchanged, in order (a superuser who rewinds the chain and the effect row
            together is seen only so).

    Returns:
        {"valid", "chain_intact", "signature", "tamper_evident", "happened" (True, False or
        "unknown"), "happened_once" (True, False or "unknown"), "authorized_when_fired" (None when
        nothing was dispatched), "assumptions_held" (None when nothing was sent), "sends",
        "state", "reconciled", "head", "unsigned", "refusals": [{"at", "reason",
        "premise_violations", "grant_refused"}], "problems": [sentence]}.

        ``valid`` says only that the bundle can be read (at least one entry, each a JSON object).
        ``chain_intact``: each entry canonical, its hash recomputing, linked to the one before,
        at its position ``n``, this effect's; the chain ending at the effect's head (else
        "truncated: ..."); the row's state, sends and reconciliation agreeing with the entries;
        and, with ``previous``, no entry of it missing or changed. ``signature``: "verified: ..."
        when every entry's signature verifies with a trusted key, else "unverified: ..." and why.
        ``tamper_evident`` (P5): chain_intact and the signature verified; never True without a
        trusted key. ``unsigned`` counts entries with no signature while a key is known (the
        bundle's or a trusted one). ``state``, ``sends`` and ``reconciled`` are derived from the
        signed entries (``chain_state``, ``send_entries``, ``chain_reconciled``; a reconciliation
        only on the row, made before RECONCILED existed, is given with ``signed: False``).
        ``head``: "checked", or why not.

    The rules, each from the bundle's entries alone:

    - happened (P1): True with a COMMITTED; "unknown" when AMBIGUOUS or a DISPATCHED is still
      open, or when entries are missing (truncated) or the row says committed over a chain with
      no COMMITTED; otherwise False.
    - happened_once (P2): True only when happened is True and the journal rules out a second
      application. False when a LATE_RESULT sits beside a COMMITTED via
      "recovery-reapply": the late answer shows the first send applied, and the reapply applied
      again. "unknown" when a COMMITTED via "recovery-reapply" follows a send whose answer the
      journal does not hold, which is every reapply without a LATE_RESULT (recovery reapplies
      only while the effect is still dispatched, so no first-send or late-commit COMMITTED and
      no target rejection answered it): that send could still have been applied late, past
      send_deadline + settle_margin (A2 broken, Prove S08c), after the lookup said not found. This
      is the standard the auditor holds Temporal to on P2 ("unknown" when a retry followed a
      timeout, prove/harness/audit.py) applied to ourselves. A tier-1 resend (via "retry-idempotent")
      reuses the idempotency key inside the dedup window, so the target deduplicates it (A4) and
      it stays True; so does a COMMITTED via "recovery-query", which sent nothing. "unknown"
      also when happened is "unknown"; False when happened is False.
    - sends: how many requests the runtime put on the wire (``send_entries``: each DISPATCHED
      and each RESENT, the signed record written before a resend's bytes leave).
    - authorized_when_fired (P3): every DISPATCHED's ``checks`` and every resend's (a RESENT, or
      in a journal older than RESENT a COMMITTED whose via is in RESEND_VIAS) ``rechecked``
      carried a live lease snapshot covering the payload
      at its ts.
    - assumptions_held (P4, "were the decision's premises checked immediately before every
      send"): the premise checks that accompanied a send, each DISPATCHED's ``checks`` and each
      resend's ``rechecked``, show zero violations; and no LATE_RESULT arrived past
      send_timeout + settle_margin (A2). A recovery re-check that found violations or a dead
      grant and then sent nothing (REFUSED, AMBIGUOUS, or COMMITTED via "recovery-query") is the
      check doing its job, not an assumption failing, and does not count. None when nothing was
      sent. What every refusing check found is in ``refusals``, so a reader is never told the
      premises held where a check found them changed.
    """
    trusted, trust_note = trusted_keyring(public_key, trusted_keys)
    chain = read_chain(bundle, trusted)
    entries = chain.entries
    head_note, truncated = head_check(bundle, chain)
    row_problems, reconciled = row_check(bundle, entries)
    compare_problems = compare(bundle, previous) if previous is not None else []
    signature = signature_words(bundle, chain, trusted, trust_note)
    dispatched = [e for e in entries if e.get("kind") == "DISPATCHED"]
    happened = _happened(entries, dispatched)
    if happened is False and (truncated or any(p.startswith("the effect row says committed") for p in row_problems)):
        # Entries are missing (or the row says what the chain does not): what they said is
        # not known, so "it did not happen" would be a claim the record cannot make.
        happened = "unknown"
    happened_once, once_problems = _happened_once(entries, happened)
    if truncated and happened_once is True:
        happened_once = "unknown"
    authorized, p3_problems = _authorized_when_fired(entries, dispatched)
    assumptions, p4_problems = _assumptions_held(entries)
    intact = chain.intact and not truncated and not row_problems and not compare_problems
    problems = chain.problems + truncated + row_problems + compare_problems
    return {
        "valid": chain.valid,
        "chain_intact": intact,
        "signature": signature,
        "tamper_evident": intact and chain.valid and signature.startswith("verified"),
        "happened": happened,
        "happened_once": happened_once,
        "authorized_when_fired": authorized if dispatched else None,
        "assumptions_held": assumptions,
        "sends": len(send_entries(entries)),
        "state": chain_state(entries),
        "reconciled": reconciled,
        "head": head_note,
        "unsigned": chain.unsigned,
        "refusals": [_refusal(e, dispatched) for e in entries if e.get("kind") == "REFUSED"],
        "problems": problems + once_problems + p3_problems + p4_problems,
    }


# -- verify's checks, in the order verify reports their problems ----------------------------------


def _happened(entries: list[dict], dispatched: list[dict]) -> Any:
    """P1: True with a COMMITTED; "unknown" when AMBIGUOUS or a DISPATCHED is still open;
    otherwise False."""
    kinds = [e.get("kind") for e in entries]
    last_resolution = None
    for e in entries:
        if e.get("kind") in ("COMMITTED", "AMBIGUOUS") or (e.get("kind") == "REFUSED"):
            last_resolution = e
    open_dispatch = bool(dispatched) and (
        last_resolution is None or entries.index(last_resolution) < entries.index(dispatched[-1])
    )
    if "COMMITTED" in kinds:
        return True
    if "AMBIGUOUS" in kinds or open_dispatch:
        return "unknown"
    if entries and entries[-1].get("kind") in ("REFUSED", "LATE_RESULT") or (kinds and "DISPATCHED" not in kinds):
        return False
    return "unknown"


def _happened_once(entries: list[dict], happened: Any) -> tuple[Any, list[str]]:
    """P2 (see verify's docstring): a reapply is a new application; with a late result beside it
    the effect was applied twice, and after an unanswered send it may have been."""
    # Recovery reapplies only while the effect is still dispatched, i.e. while no first-send or
    # late-commit COMMITTED and no target rejection answered the last send; a LATE_RESULT is the
    # only way the journal can hold that send's answer (recovery.recover, send._late_result).
    reapplied = any(e.get("kind") == "COMMITTED" and e.get("via") == REAPPLY_VIA for e in entries)
    if not (happened is True and reapplied):
        return happened, []
    if any(e.get("kind") == "LATE_RESULT" for e in entries):
        return False, ["a late result arrived after a reapply: the effect was applied twice"]
    return "unknown", [
        "recovery reapplied the effect (recovery-reapply) after a send whose answer the journal does "
        "not hold: that send could have been applied late, after send_deadline + settle_margin (A2), "
        "in which case the target applied the effect twice, so happened_once is unknown"
    ]


def _authorized_when_fired(entries: list[dict], dispatched: list[dict]) -> tuple[bool, list[str]]:
    """P3: every DISPATCHED and every resend carried a live lease covering the payload at its ts."""
    authorized = True
    problems = []
    for e in send_entries(entries):
        checks = send_checks(e) or {}
        if e.get("kind") == "DISPATCHED":
            payload = e.get("effect")
        else:
            payload = e.get("effect", dispatched[-1].get("effect") if dispatched else None)
        # cast: the isinstance test makes it a number (mypy does not narrow a repeated e.get).
        ts = cast(float, e.get("ts")) if isinstance(e.get("ts"), (int, float)) else float("inf")
        ok, why = lease_live(checks.get("lease") if isinstance(checks, dict) else None, ts, payload)
        if not ok or not checks.get("lease_live"):
            authorized = False
            problems.append(f"{e['kind']} at ts {e.get('ts')}: not authorized ({why or 'lease not live'})")
    return authorized, problems


def _assumptions_held(entries: list[dict]) -> tuple[bool | None, list[str]]:
    """P4: zero premise violations in every check that accompanied a send (each DISPATCHED, each
    resend), and no late result past send_deadline + settle_margin (A2); None when nothing was
    sent. A re-check that refused or resolved without sending is not counted (see verify's
    docstring)."""
    assumptions: bool | None = True
    problems = []
    sends = send_entries(entries)
    for e in entries:
        checks = send_checks(e) if any(e is x for x in sends) else None
        if isinstance(checks, dict) and checks.get("violations"):
            assumptions = False
            problems.append(f"{e['kind']} at ts {e.get('ts')}: premise violations {checks['violations']}")
        if e.get("kind") == "LATE_RESULT" and arrived_past_settle(e):
            assumptions = False
            problems.append("a response arrived after send_deadline + settle_margin (A2 did not hold)")
    if not sends:
        # Nothing went out: "were the premises checked before every send" has no answer, and a
        # True here would read as "the premises held" beside a refusal that found them changed.
        assumptions = None
    return assumptions, problems


def _refusal(entry: dict, dispatched: list[dict]) -> dict:
    """A REFUSED entry in plain terms: {"at": "dispatch" or "recovery", "reason": sentence,
    "premise_violations": [sentence], "grant_refused": bool}."""
    checks = entry.get("rechecked") if isinstance(entry.get("rechecked"), dict) else entry.get("checks")
    checks = checks if isinstance(checks, dict) else {}
    reason = entry.get("reason")
    violations = list(checks.get("violations") or [])
    if isinstance(reason, list):  # T_dispatch writes the premise violations as the reason
        violations = violations or [str(r) for r in reason]
        reason = "premises changed"
    at_recovery = (
        entry.get("rechecked") is not None
        or "at recovery" in str(reason)
        or (bool(dispatched) and entry.get("found") is False)
    )
    return {
        "at": "recovery" if at_recovery else "dispatch",
        "reason": str(reason),
        "premise_violations": violations,
        "grant_refused": checks.get("lease_live") is False or str(reason).startswith(("lease", "lease not live")),
    }
