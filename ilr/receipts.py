"""Receipts: the bundle of an effect's journal and ``verify()`` (design-notes §4).

``verify`` answers the auditor's five questions (spec §11.6.2) from the bundle alone:
P1 happened, P2 happened_once, P3 authorized_when_fired, P4 assumptions_held, P5
tamper_evident. It never reads the target or the database.
"""

from __future__ import annotations

import json
from typing import Any

from cryptography.exceptions import InvalidSignature

from ilr import codec, keys

RESEND_VIAS = ("retry-idempotent", "recovery-reapply")


def bundle(conn, effect_id: str, public_key=None) -> dict:
    """The receipt bundle of ``effect_id``.

    Returns:
        {"effect_id", "entries": [sealed body text, ...], "late_result", "reconciled",
        "sends", "state", "key_id", "public_key"}; late_result, reconciled, sends and state
        come from the effects row and are not signed.

    Raises:
        LookupError: no effect has this id.
    """
    row = conn.execute("select state, late_result, reconciled, sends from ilr.effects where effect_id = %s",
                       (effect_id,)).fetchone()
    if row is None:
        raise LookupError(f"effect_id: no effect with id {effect_id!r}")
    bodies = [r["body"] for r in conn.execute(
        "select body from ilr.journal where effect_id = %s order by seq", (effect_id,)).fetchall()]
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
    received, timeout, settle = entry.get("received_in_s"), entry.get("send_timeout"), entry.get("settle_margin")
    if all(isinstance(x, (int, float)) for x in (received, timeout, settle)):
        return received > timeout + settle
    ts, deadline = entry.get("ts"), entry.get("settle_deadline")
    return isinstance(ts, (int, float)) and isinstance(deadline, (int, float)) and ts > deadline


def verify(bundle: dict, public_key=None) -> dict:
    """Check a receipt bundle and answer P1 to P5 (design-notes §4).

    Args:
        bundle: from ``bundle()`` (or a copy of it, e.g. a downloaded JSON file).
        public_key: an Ed25519 public key; default the bundle's own ``public_key`` PEM. A
            signature is required of every entry when a key is known.

    Returns:
        {"valid", "tamper_evident", "happened" (True, False or "unknown"), "happened_once",
        "authorized_when_fired", "assumptions_held", "sends", "problems": [sentence]}.
    """
    problems: list[str] = []
    valid = True
    tamper_evident = True
    if public_key is None and bundle.get("public_key"):
        try:
            public_key = keys.load_public_pem(bundle["public_key"])
        except ValueError:
            problems.append("the bundle's public key does not load")
            tamper_evident = False
    entries: list[dict] = []
    prev = None
    for i, body in enumerate(bundle.get("entries") or []):
        try:
            entry = json.loads(body)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
        except ValueError:
            problems.append(f"entry {i + 1} is not valid JSON")
            tamper_evident = False
            valid = False
            continue
        if codec.canonical(entry) != body:
            problems.append(f"entry {i + 1} is not in canonical form")
            tamper_evident = False
        unsigned = {k: v for k, v in entry.items() if k not in ("hash", "sig")}
        if codec.sha256_hex(codec.canonical(unsigned)) != entry.get("hash"):
            problems.append(f"entry {i + 1} ({entry.get('kind')}): hash does not recompute")
            tamper_evident = False
        if entry.get("prev") != prev:
            problems.append(f"entry {i + 1} ({entry.get('kind')}): prev link breaks the chain")
            tamper_evident = False
        if entry.get("effect_id") != bundle.get("effect_id"):
            problems.append(f"entry {i + 1} belongs to another effect")
            tamper_evident = False
        if public_key is not None:
            try:
                public_key.verify(bytes.fromhex(entry.get("sig") or ""), str(entry.get("hash")).encode())
            except (InvalidSignature, ValueError):
                problems.append(f"entry {i + 1} ({entry.get('kind')}): signature does not verify")
                tamper_evident = False
        prev = entry.get("hash")
        entries.append(entry)
    if not entries:
        valid = False
        problems.append("the bundle holds no entries")

    kinds = [e.get("kind") for e in entries]
    last_resolution = None
    for e in entries:
        if e.get("kind") in ("COMMITTED", "AMBIGUOUS") or (e.get("kind") == "REFUSED"):
            last_resolution = e
    dispatched = [e for e in entries if e.get("kind") == "DISPATCHED"]
    open_dispatch = bool(dispatched) and (last_resolution is None or
                                          entries.index(last_resolution) < entries.index(dispatched[-1]))

    # P1 happened
    if "COMMITTED" in kinds:
        happened: Any = True
    elif "AMBIGUOUS" in kinds or open_dispatch:
        happened = "unknown"
    elif entries and entries[-1].get("kind") in ("REFUSED", "LATE_RESULT") or (kinds and "DISPATCHED" not in kinds):
        happened = False
    else:
        happened = "unknown"

    # P2 happened once: a late result after a reapply shows a second application.
    reapplied = any(e.get("kind") == "COMMITTED" and e.get("via") == "recovery-reapply" for e in entries)
    late = [e for e in entries if e.get("kind") == "LATE_RESULT"]
    happened_once: Any = happened is True and not (reapplied and late)
    if happened == "unknown":
        happened_once = "unknown"
    if happened is True and reapplied and late:
        problems.append("a late result arrived after a reapply: the effect was applied twice")

    # P3 authorized when fired: every DISPATCHED and every resend carried a live lease.
    authorized = True
    for e in entries:
        checks = None
        if e.get("kind") == "DISPATCHED":
            checks = e.get("checks") or {}
            payload = e.get("effect")
        elif e.get("kind") == "COMMITTED" and e.get("via") in RESEND_VIAS:
            checks = e.get("rechecked") or {}
            payload = e.get("effect", dispatched[-1].get("effect") if dispatched else None)
        if checks is None:
            continue
        ts = e.get("ts") if isinstance(e.get("ts"), (int, float)) else float("inf")
        ok, why = _lease_live(checks.get("lease") if isinstance(checks, dict) else None, ts, payload)
        if not ok or not checks.get("lease_live"):
            authorized = False
            problems.append(f"{e['kind']} at ts {e.get('ts')}: not authorized ({why or 'lease not live'})")

    # P4 assumptions held: zero premise violations at every dispatch and recovery re-check, and
    # no late result past send_deadline + settle_margin (A2).
    assumptions = True
    for e in entries:
        checks = e.get("checks") if e.get("kind") == "DISPATCHED" else e.get("rechecked")
        if checks and checks.get("violations"):
            assumptions = False
            problems.append(f"{e['kind']} at ts {e.get('ts')}: premise violations {checks['violations']}")
        if e.get("kind") == "LATE_RESULT" and _arrived_past_settle(e):
            assumptions = False
            problems.append("a response arrived after send_deadline + settle_margin (A2 did not hold)")

    sends = len(dispatched) + sum(1 for e in entries if e.get("kind") == "COMMITTED" and e.get("via") in RESEND_VIAS)
    return {
        "valid": valid,
        "tamper_evident": tamper_evident,
        "happened": happened,
        "happened_once": happened_once,
        "authorized_when_fired": authorized if dispatched else None,
        "assumptions_held": assumptions,
        "sends": sends,
        "problems": problems,
    }
