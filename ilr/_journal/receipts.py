"""Receipts: the bundle of an effect's journal and ``verify()`` (docs/protocol.md §9).

``verify`` answers the auditor's five questions (docs/protocol.md §16.5) from the bundle and the
keys it trusts: P1 happened, P2 happened_once, P3 authorized_when_fired, P4 assumptions_held, P5
tamper_evident. It never reads the target or the database. What a receipt proves, to whom, and
against whom: docs/security.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, cast

from cryptography.exceptions import InvalidSignature

from ilr import _codec as codec
from ilr._journal import keys

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


BUNDLE_SQL = (
    "select state, late_result, reconciled, sends, head_hash, head_n, "
    "array(select body from ilr.journal j where j.effect_id = e.effect_id order by seq) as bodies "
    "from ilr.effects e where effect_id = %s"
)
"""The effect row and its entries in one statement: one snapshot, so a commit between two reads
never shows a row ahead of (or behind) its chain."""


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


def chain_state(entries: list[dict]) -> str:
    """The effect's state as its signed entries say it (docs/protocol.md §9): proposed until a
    DISPATCHED or RESENT (dispatched); COMMITTED and AMBIGUOUS are terminal; a REFUSED while
    dispatched returns it to proposed (the resolving refusals); the other kinds leave it."""
    state = "proposed"
    for e in entries:
        kind = e.get("kind")
        if state in ("committed", "ambiguous"):
            continue
        if kind in ("DISPATCHED", "RESENT"):
            state = "dispatched"
        elif kind == "COMMITTED":
            state = "committed"
        elif kind == "AMBIGUOUS":
            state = "ambiguous"
        elif kind == "REFUSED" and state == "dispatched":
            state = "proposed"
    return state


def chain_reconciled(entries: list[dict]) -> dict | None:
    """The signed attestation of a RECONCILED entry: {by (its ``who``), applied, evidence, at (its
    ts)}, as the effect row's ``reconciled`` holds it; or None."""
    for e in entries:
        if e.get("kind") == "RECONCILED":
            return {"by": e.get("who"), "applied": e.get("applied"), "evidence": e.get("evidence"), "at": e.get("ts")}
    return None


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
    # The snapshot names the target's amount field when it is not "amount" (effect_rules.lease_snapshot).
    field = snapshot.get("amount_field") or "amount"
    amount = payload.get(field) if isinstance(payload, dict) else None
    if max_cents is not None and (isinstance(amount, bool) or not isinstance(amount, int) or amount > max_cents):
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
    trusted, trust_note = _trusted(public_key, trusted_keys)
    chain = _read_chain(bundle, trusted)
    entries = chain.entries
    head_note, truncated = _head_check(bundle, chain)
    row_problems, reconciled = _row_problems(bundle, entries)
    compare_problems = _compare(bundle, previous) if previous is not None else []
    signature = _signature_words(bundle, chain, trusted, trust_note)
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


def _as_keyring(keys_in: Any) -> dict[str, Any]:
    """{kid: public key} from a key, a list of keys, or a {kid: key} mapping (kids recomputed:
    a mapping's own labels are not trusted)."""
    if keys_in is None:
        return {}
    if isinstance(keys_in, dict):
        keys_in = list(keys_in.values())
    elif not isinstance(keys_in, (list, tuple, set, frozenset)):
        keys_in = [keys_in]
    out = {}
    for key in keys_in:
        if isinstance(key, str):
            key = keys.load_public_pem(key)
        kid = keys.key_id(key)
        if kid is not None:
            out[kid] = key
    return out


def _trusted(public_key: Any, trusted_keys: Any) -> tuple[dict[str, Any], str]:
    """(the trusted keys by kid, where they came from, in words)."""
    if public_key is not None:
        return _as_keyring(public_key), "the pinned key"
    if trusted_keys is not None:
        return _as_keyring(trusted_keys), "the given trusted keys"
    try:
        return keys.trusted_keys(), "this deployment's key directory"
    except Exception as exc:  # noqa: BLE001 - no settings, or an unreadable key: trust nothing
        return {}, f"this deployment's key directory, which cannot be read ({exc})"


@dataclass
class _Chain:
    """What reading the bundle's entries found (``valid``, ``chain_intact``, the signatures)."""

    entries: list[dict] = field(default_factory=list)
    """The entries that parse as JSON objects, in order."""
    valid: bool = True
    intact: bool = True
    """Seals and links only (verify adds the head, the row and the earlier receipt)."""
    unsigned: int = 0
    verified_by: set[str] = field(default_factory=set)
    """Key ids whose signatures verified."""
    untrusted: dict[str, list[int]] = field(default_factory=dict)
    """{kid or "": [entry numbers]}: signed, but not by a trusted key ("": an entry naming no kid)."""
    bad: list[int] = field(default_factory=list)
    """Entries whose signature does not verify with the trusted key they name."""
    problems: list[str] = field(default_factory=list)


def _read_chain(bundle: dict, trusted: dict[str, Any]) -> _Chain:
    """Parse every entry and check its seal: canonical form, hash, the prev link, its position,
    the effect id, and its signature against the trusted keys. An entry that is not a JSON
    object makes the bundle invalid and is skipped (the next entry's prev link is checked
    against the last one read)."""
    chain = _Chain()
    prev = None
    key_known = bool(trusted) or bool(bundle.get("key_id") or bundle.get("public_key"))
    for i, body in enumerate(bundle.get("entries") or []):
        try:
            entry = json.loads(body)
            if not isinstance(entry, dict):
                raise ValueError("not an object")
        except ValueError:
            chain.problems.append(f"entry {i + 1} is not valid JSON")
            chain.intact = False
            chain.valid = False
            continue
        found = _seal_problems(i + 1, body, entry, prev, bundle.get("effect_id"))
        altered, unsigned = _signature_check(chain, i + 1, entry, trusted, bundle.get("key_id"), key_known)
        if found or altered:
            chain.intact = False
        chain.problems += found + altered + unsigned
        prev = entry.get("hash")
        chain.entries.append(entry)
    if not chain.entries:
        chain.valid = False
        chain.problems.append("the bundle holds no entries")
    return chain


def _seal_problems(n: int, body: str, entry: dict, prev: str | None, effect_id: Any) -> list[str]:
    """What is wrong with entry number ``n`` (from 1) as a link of the chain: not canonical, a
    hash that does not recompute, a prev that is not the previous entry's hash, a position that
    is not its place (an entry written before positions has none), another effect's."""
    problems = []
    if codec.canonical(entry) != body:
        problems.append(f"entry {n} is not in canonical form")
    unsigned = {k: v for k, v in entry.items() if k not in ("hash", "sig")}
    if codec.sha256_hex(codec.canonical(unsigned)) != entry.get("hash"):
        problems.append(f"entry {n} ({entry.get('kind')}): hash does not recompute")
    if entry.get("prev") != prev:
        problems.append(f"entry {n} ({entry.get('kind')}): prev link breaks the chain")
    if "n" in entry and entry.get("n") != n:
        problems.append(f"entry {n} ({entry.get('kind')}): its position n is {entry.get('n')!r}, not {n}")
    if entry.get("effect_id") != effect_id:
        problems.append(f"entry {n} belongs to another effect")
    return problems


def _signature_check(
    chain: _Chain, n: int, entry: dict, trusted: dict[str, Any], bundle_kid: Any, key_known: bool
) -> tuple[list[str], list[str]]:
    """Check entry number ``n``'s signature against the trusted keys, recording in ``chain``
    which key verified it, or that its key is not trusted. Returns (the problems that mean the
    chain was altered: a signature that does not verify with the trusted key it names; while a
    key is known, the entry's lack of a signature: it cannot be checked, but is not shown
    altered)."""
    sig = entry.get("sig")
    if not sig:
        if not key_known:
            return [], []
        chain.unsigned += 1
        # Not provably altered, but not provable either: anyone who can write the journal can
        # recompute an unsigned chain, so once a key is known every entry must carry a signature.
        return [], [
            f"entry {n} ({entry.get('kind')}) is not signed although a key is known: "
            f"written before the key existed or by a worker started without it, or its "
            f"signature was removed; it cannot be checked"
        ]
    kid = entry.get("kid")
    if isinstance(kid, str):
        candidates = [(kid, trusted[kid])] if kid in trusted else []
    else:
        # Written before entries named their key: the bundle's key first, then each trusted key.
        candidates = sorted(trusted.items(), key=lambda kv: kv[0] != bundle_kid)
    if not candidates:
        chain.untrusted.setdefault(kid if isinstance(kid, str) else "", []).append(n)
        return [], []
    for cid, key in candidates:
        try:
            key.verify(bytes.fromhex(str(sig)), str(entry.get("hash")).encode())
        except (InvalidSignature, ValueError):
            continue
        chain.verified_by.add(cid)
        return [], []
    if isinstance(kid, str):
        chain.bad.append(n)
        return [f"entry {n} ({entry.get('kind')}): signature does not verify with key {kid}"], []
    # No kid and no trusted key verifies it: signed by some key this verifier does not trust.
    chain.untrusted.setdefault("", []).append(n)
    return [], []


def _signature_words(bundle: dict, chain: _Chain, trusted: dict[str, Any], source: str) -> str:
    """verify's ``signature``: "verified: ..." or "unverified: ..." with why, in words."""
    entries = len(chain.entries)
    if chain.bad:
        return f"unverified: the signature of {_entries_words(chain.bad)} does not verify"
    reasons = []
    bundle_kid = bundle.get("key_id")
    for kid, numbers in sorted(chain.untrusted.items()):
        if kid and kid == bundle_kid:
            reasons.append(f"the bundle names key {kid}, which is not a trusted key")
        elif kid:
            reasons.append(f"{_entries_words(numbers)} signed by key {kid}, which is not a trusted key")
        elif bundle_kid and bundle_kid not in trusted:
            reasons.append(f"the bundle names key {bundle_kid}, which is not a trusted key")
        else:
            reasons.append(f"{_entries_words(numbers)} signed by a key that is not trusted")
    if chain.unsigned:
        reasons.append(
            f"{chain.unsigned} of {entries} entries are not signed (written before the key existed, by a worker "
            "without it, or stripped)"
        )
    if not trusted:
        reasons.append(f"no trusted key is known ({source} holds none): pass the deployment's public key")
    if reasons:
        return "unverified: " + "; ".join(dict.fromkeys(reasons))
    if not chain.entries:
        return "unverified: no entries"
    return f"verified: every entry is signed by a trusted key ({', '.join(sorted(chain.verified_by))}, from {source})"


def _entries_words(numbers: list[int]) -> str:
    """ "entry 3" or "entries 1, 2"."""
    return ("entry " if len(numbers) == 1 else "entries ") + ", ".join(str(x) for x in numbers)


def _head_check(bundle: dict, chain: _Chain) -> tuple[str, list[str]]:
    """(verify's ``head``, the truncation problems): the chain must end at the effect's head."""
    head = bundle.get("head")
    if not isinstance(head, dict) or not isinstance(head.get("n"), int):
        return "not checked: the bundle carries no head", []
    k, n = len(bundle.get("entries") or []), head["n"]
    last = chain.entries[-1].get("hash") if chain.entries else None
    if k < n:
        return "checked", [f"truncated: the chain ends at entry {k} but the effect's head is entry {n}"]
    if k > n:
        return "checked", [f"the chain holds {k} entries but the effect's head is entry {n}"]
    if head.get("hash") != last:
        return "checked", [f"the chain's entry {k} is not the effect's head (another hash)"]
    return "checked", []


def _row_problems(bundle: dict, entries: list[dict]) -> tuple[list[str], dict | None]:
    """(problems, the reconciliation): the effect row's state, sends and reconciled, which the
    bundle copies unsigned, against what the signed entries say."""
    problems = []
    derived = chain_state(entries)
    row_state = bundle.get("state")
    if row_state is not None and entries and row_state != derived:
        if row_state == "committed" and not any(e.get("kind") == "COMMITTED" for e in entries):
            problems.append("the effect row says committed but the chain holds no COMMITTED entry")
        else:
            problems.append(f"the effect row's state {row_state} differs from the signed journal's ({derived})")
    sent = send_entries(entries)
    legacy = any(e.get("kind") == "COMMITTED" for e in sent)  # a resend before RESENT existed
    row_sends = bundle.get("sends")
    if isinstance(row_sends, int) and entries and not legacy and row_sends != len(sent):
        problems.append(f"the effect row's sends {row_sends} differs from the signed journal's ({len(sent)})")
    signed = chain_reconciled(entries)
    row = bundle.get("reconciled")
    if signed is not None:
        same = isinstance(row, dict) and all(row.get(k) == signed[k] for k in ("by", "applied", "evidence"))
        if "reconciled" in bundle and not same:  # a bundle without the row's copy has nothing to compare
            problems.append("the effect row's reconciled differs from the signed RECONCILED entry")
        return problems, {**signed, "signed": True}
    if isinstance(row, dict):
        # Recorded before RECONCILED entries existed: a person's statement the record does not hold.
        return problems, {**row, "signed": False}
    return problems, None


def _compare(bundle: dict, previous: dict) -> list[str]:
    """What an earlier receipt of the same effect shows about this one: it must hold every
    earlier entry, unchanged and in order."""
    if previous.get("effect_id") != bundle.get("effect_id"):
        return [f"the earlier receipt is of effect {previous.get('effect_id')!r}, not {bundle.get('effect_id')!r}"]
    old, new = list(previous.get("entries") or []), list(bundle.get("entries") or [])
    for i, body in enumerate(old[: len(new)]):
        if body != new[i]:
            return [f"forked: entry {i + 1} differs from the earlier receipt's entry {i + 1}"]
    if len(new) < len(old):
        return [f"shrank: an earlier receipt of this effect held {len(old)} entries, this one holds {len(new)}"]
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
