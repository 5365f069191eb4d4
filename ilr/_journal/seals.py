"""The checks of a receipt's chain: trusted keys, each entry's seal and signature, the chain's
head against the effect row, and a comparison with an earlier bundle (docs/protocol.md §9,
docs/security.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature

from ilr import _codec as codec
from ilr._journal import keys
from ilr._journal.history import chain_reconciled, chain_state, send_entries


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


def trusted_keyring(public_key: Any, trusted_keys: Any) -> tuple[dict[str, Any], str]:
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
class Chain:
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


def read_chain(bundle: dict, trusted: dict[str, Any]) -> Chain:
    """Parse every entry and check its seal: canonical form, hash, the prev link, its position,
    the effect id, and its signature against the trusted keys. An entry that is not a JSON
    object makes the bundle invalid and is skipped (the next entry's prev link is checked
    against the last one read)."""
    chain = Chain()
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
    chain: Chain, n: int, entry: dict, trusted: dict[str, Any], bundle_kid: Any, key_known: bool
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


def signature_words(bundle: dict, chain: Chain, trusted: dict[str, Any], source: str) -> str:
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


def head_check(bundle: dict, chain: Chain) -> tuple[str, list[str]]:
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


def row_check(bundle: dict, entries: list[dict]) -> tuple[list[str], dict | None]:
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


def compare(bundle: dict, previous: dict) -> list[str]:
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
