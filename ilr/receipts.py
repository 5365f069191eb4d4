"""Receipts: the bundle of an effect's journal and ``verify()`` (docs/protocol.md §9).

``verify`` answers the auditor's five questions (docs/protocol.md §16.5) from the bundle alone:
P1 happened, P2 happened_once, P3 authorized_when_fired, P4 assumptions_held, P5
tamper_evident. It never reads the target or the database.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from cryptography.exceptions import InvalidSignature

from ilr import codec, keys

IDEMPOTENT_RESEND_VIA = "retry-idempotent"
"""COMMITTED.via of a tier-1 recovery resend under the same idempotency key, inside the target's
dedup window (status COMMITTED_BY_RETRY): the target deduplicates it (A4), so it is no new
application."""
REAPPLY_VIA = "recovery-reapply"
"""COMMITTED.via of a recovery reapply after the target's lookup found nothing (tier 2, or tier 1
past dedup_window - DEDUP_MARGIN; status REAPPLIED_AFTER_QUERY): a new application that no
idempotency key deduplicates."""
RESEND_VIAS = (IDEMPOTENT_RESEND_VIA, REAPPLY_VIA)
"""The COMMITTED vias whose entry records a send made by recovery (the rest, "first-send",
"late-commit" and "recovery-query", record no send of their own)."""


def bundle(conn, effect_id: str, public_key=None) -> dict:
    """The receipt bundle of ``effect_id``.

    Returns:
        {"effect_id", "entries": [sealed body text, ...], "late_result", "reconciled",
        "sends", "state", "key_id", "public_key"}; late_result, reconciled, sends and state
        come from the effects row and are not signed.

    Raises:
        LookupError: no effect has this id.
    """
    row = conn.execute(
        "select state, late_result, reconciled, sends from ilr.effects where effect_id = %s", (effect_id,)
    ).fetchone()
    if row is None:
        raise LookupError(f"effect_id: no effect with id {effect_id!r}")
    bodies = [
        r["body"]
        for r in conn.execute("select body from ilr.journal where effect_id = %s order by seq", (effect_id,)).fetchall()
    ]
    public_key = public_key or keys.public_key()
    return {
        "effect_id": effect_id,
        "entries": bodies,
        "late_result": row["late_result"],
        "reconciled": row["reconciled"],
        "sends": row["sends"],
        "state": row["state"],
        "key_id": keys.key_id(public_key),
        "public_key": keys.public_key_pem(public_key),
    }


def _lease_live(snapshot: dict | None, ts: float, payload: Any) -> tuple[bool, str | None]:
    """Whether a lease snapshot authorized ``payload`` at database time ``ts`` (seconds)."""
    if not snapshot:
        return False, "no lease snapshot"
    if snapshot.get("revoked"):
        return False, f"grant {snapshot.get('grant_id')} was revoked at {snapshot['revoked']}"
    expires = snapshot.get("expires_at_ts")
    if expires is not None and expires <= ts:
        return False, f"grant {snapshot.get('grant_id')} had expired"
    max_cents = snapshot.get("max_cents")
    amount = payload.get("amount") if isinstance(payload, dict) else None
    if max_cents is not None and (not isinstance(amount, int) or amount > max_cents):
        return False, f"amount {amount} exceeds the grant's max_cents {max_cents}"
    bound = snapshot.get("payload_hash")
    if bound is not None and bound != codec.payload_hash(payload):
        return False, "the payload differs from the one the approval bound"
    if snapshot.get("action_matches") is False:
        return False, "the grant's action does not cover this effect"
    return True, None


def _arrived_past_settle(entry: dict) -> bool:
    """A2 for a late result: the answer arrived later than send_timeout + settle_margin after
    the send's stopwatch started (measured by the sender), or, without that measure, the entry
    was written past send_deadline + settle_margin."""
    received: Any  # Any: mypy does not narrow through the all(isinstance(...)) below
    timeout: Any
    settle: Any
    received, timeout, settle = entry.get("received_in_s"), entry.get("send_timeout"), entry.get("settle_margin")
    if all(isinstance(x, (int, float)) for x in (received, timeout, settle)):
        return received > timeout + settle
    ts, deadline = entry.get("ts"), entry.get("settle_deadline")
    return isinstance(ts, (int, float)) and isinstance(deadline, (int, float)) and ts > deadline


def send_entries(entries: list[dict]) -> list[dict]:
    """The entries that record a send, one per request the runtime put on the wire: every
    DISPATCHED and every RESENT (docs/protocol.md §6.5), each carrying the checks that
    authorized it. A COMMITTED whose via is a resend records a send only in a journal written
    before RESENT existed (no RESENT precedes it since the last DISPATCHED): then it carries
    the resend's ``rechecked`` itself.
    """
    out = []
    resent_open = False
    for e in entries:
        kind = e.get("kind")
        if kind == "DISPATCHED":
            out.append(e)
            resent_open = False
        elif kind == "RESENT":
            out.append(e)
            resent_open = True
        elif kind == "COMMITTED" and e.get("via") in RESEND_VIAS and not resent_open:
            out.append(e)
    return out


def _send_checks(entry: dict) -> Any:
    """The checks that accompanied the send ``entry`` records: a DISPATCHED's ``checks``, a
    resend's ``rechecked`` (None when absent)."""
    return entry.get("checks") if entry.get("kind") == "DISPATCHED" else entry.get("rechecked")


def verify(bundle: dict, public_key=None) -> dict:
    """Check a receipt bundle and answer P1 to P5 (docs/protocol.md §9).

    Args:
        bundle: from ``bundle()`` (or a copy of it, e.g. a downloaded JSON file).
        public_key: an Ed25519 public key; default the bundle's own ``public_key`` PEM. A
            signature is required of every entry when a key is known.

    Returns:
        {"valid", "tamper_evident", "happened" (True, False or "unknown"), "happened_once"
        (True, False or "unknown"), "authorized_when_fired" (None when nothing was dispatched),
        "assumptions_held" (None when nothing was sent), "sends", "unsigned", "refusals": [{"at",
        "reason", "premise_violations", "grant_refused"}], "problems": [sentence]}. ``unsigned`` counts
        entries with no signature although a key is known (each makes tamper_evident False:
        such an entry cannot be checked). ``valid`` says only that the
        bundle can be read (at least one entry, each a JSON object); ``tamper_evident`` (P5)
        that nothing was found altered: each entry canonical, its hash recomputing, the chain
        linked, every entry this effect's, and with a key every signature verifying.

    The rules, each from the bundle's entries alone:

    - happened (P1): True with a COMMITTED; "unknown" when AMBIGUOUS or a DISPATCHED is still
      open; otherwise False.
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
    public_key, key_problems = _bundle_key(bundle, public_key)
    chain = _read_chain(bundle, public_key)
    entries = chain.entries
    dispatched = [e for e in entries if e.get("kind") == "DISPATCHED"]
    happened = _happened(entries, dispatched)
    happened_once, once_problems = _happened_once(entries, happened)
    authorized, p3_problems = _authorized_when_fired(entries, dispatched)
    assumptions, p4_problems = _assumptions_held(entries)
    return {
        "valid": chain.valid,
        "tamper_evident": not key_problems and chain.tamper_evident,
        "happened": happened,
        "happened_once": happened_once,
        "authorized_when_fired": authorized if dispatched else None,
        "assumptions_held": assumptions,
        "sends": len(send_entries(entries)),
        "unsigned": chain.unsigned,
        "refusals": [_refusal(e, dispatched) for e in entries if e.get("kind") == "REFUSED"],
        "problems": key_problems + chain.problems + once_problems + p3_problems + p4_problems,
    }


# -- verify's checks, in the order verify reports their problems ----------------------------------


def _bundle_key(bundle: dict, public_key) -> tuple[Any, list[str]]:
    """(the key to check signatures with, problems): ``public_key`` when given, else the bundle's
    own PEM (None when it has none, or when it does not load: a problem, and not tamper_evident)."""
    if public_key is None and bundle.get("public_key"):
        try:
            return keys.load_public_pem(bundle["public_key"]), []
        except ValueError:
            return None, ["the bundle's public key does not load"]
    return public_key, []


@dataclass
class _Chain:
    """What reading the bundle's entries found (P5 and ``valid``)."""

    entries: list[dict] = field(default_factory=list)
    """The entries that parse as JSON objects, in order."""
    valid: bool = True
    tamper_evident: bool = True
    unsigned: int = 0
    problems: list[str] = field(default_factory=list)


def _read_chain(bundle: dict, public_key) -> _Chain:
    """Parse every entry and check its seal: canonical form, hash, the prev link, the effect id,
    and with a key its signature. An entry that is not a JSON object makes the bundle invalid
    and is skipped (the next entry's prev link is checked against the last one read)."""
    chain = _Chain()
    prev = None
    for i, body in enumerate(bundle.get("entries") or []):
        try:
            entry = json.loads(body)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
        except ValueError:
            chain.problems.append(f"entry {i + 1} is not valid JSON")
            chain.tamper_evident = False
            chain.valid = False
            continue
        found = _seal_problems(i + 1, body, entry, prev, bundle.get("effect_id"))
        if public_key is not None and not entry.get("sig"):
            chain.unsigned += 1
        found += _signature_problems(i + 1, entry, public_key)
        if found:
            chain.problems += found
            chain.tamper_evident = False
        prev = entry.get("hash")
        chain.entries.append(entry)
    if not chain.entries:
        chain.valid = False
        chain.problems.append("the bundle holds no entries")
    return chain


def _seal_problems(n: int, body: str, entry: dict, prev: str | None, effect_id: Any) -> list[str]:
    """What is wrong with entry number ``n`` (from 1) as a link of the chain: not canonical, a
    hash that does not recompute, a prev that is not the previous entry's hash, another effect's."""
    problems = []
    if codec.canonical(entry) != body:
        problems.append(f"entry {n} is not in canonical form")
    unsigned = {k: v for k, v in entry.items() if k not in ("hash", "sig")}
    if codec.sha256_hex(codec.canonical(unsigned)) != entry.get("hash"):
        problems.append(f"entry {n} ({entry.get('kind')}): hash does not recompute")
    if entry.get("prev") != prev:
        problems.append(f"entry {n} ({entry.get('kind')}): prev link breaks the chain")
    if entry.get("effect_id") != effect_id:
        problems.append(f"entry {n} belongs to another effect")
    return problems


def _signature_problems(n: int, entry: dict, public_key) -> list[str]:
    """With a key, what is wrong with entry number ``n``'s signature: missing, or not verifying."""
    if public_key is None:
        return []
    if not entry.get("sig"):
        # Not provably altered, but not provable either: anyone who can write the journal
        # can recompute an unsigned chain, so with a key every entry must carry a signature.
        return [
            f"entry {n} ({entry.get('kind')}) is not signed although the bundle names a key: "
            f"written before the key existed or by a worker started without it, or its "
            f"signature was removed; it cannot be checked"
        ]
    try:
        public_key.verify(bytes.fromhex(entry.get("sig") or ""), str(entry.get("hash")).encode())
    except (InvalidSignature, ValueError):
        return [f"entry {n} ({entry.get('kind')}): signature does not verify"]
    return []


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
    # only way the journal can hold that send's answer (EffectCall._recover, EffectCall._late_result).
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
        checks = _send_checks(e) or {}
        if e.get("kind") == "DISPATCHED":
            payload = e.get("effect")
        else:
            payload = e.get("effect", dispatched[-1].get("effect") if dispatched else None)
        # cast: the isinstance test makes it a number (mypy does not narrow a repeated e.get).
        ts = cast(float, e.get("ts")) if isinstance(e.get("ts"), (int, float)) else float("inf")
        ok, why = _lease_live(checks.get("lease") if isinstance(checks, dict) else None, ts, payload)
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
        checks = _send_checks(e) if any(e is x for x in sends) else None
        if isinstance(checks, dict) and checks.get("violations"):
            assumptions = False
            problems.append(f"{e['kind']} at ts {e.get('ts')}: premise violations {checks['violations']}")
        if e.get("kind") == "LATE_RESULT" and _arrived_past_settle(e):
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
