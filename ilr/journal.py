"""The effect journal: sealed, chained entries (design-notes §4, spec §4).

A sealed entry is ``{kind, effect_id, ts, prev, ...fields, hash, sig}``: ``prev`` is the previous
entry's hash for this effect (null for the first), ``ts`` the database clock, ``hash`` the
sha256 of the canonical entry without hash and sig, ``sig`` an Ed25519 signature over the hash
(hex) or null. The body column keeps the canonical text verbatim. PostgreSQL refuses a forked
chain (unique nulls not distinct (effect_id, prev)) and a second COMMITTED (one_commit).
"""

from __future__ import annotations

import json
from typing import Any

from ilr import codec, keys

KINDS = ("PROPOSED", "AUTHORIZED", "DISPATCHED", "COMMITTED", "REFUSED", "AMBIGUOUS", "LATE_RESULT")


def seal(entry: dict, signing_key=None) -> dict:
    """Return ``entry`` with ``hash`` and ``sig`` set."""
    unsigned = {k: v for k, v in entry.items() if k not in ("hash", "sig")}
    digest = codec.sha256_hex(codec.canonical(unsigned))
    sig = signing_key.sign(digest.encode()).hex() if signing_key is not None else None
    return {**unsigned, "hash": digest, "sig": sig}


def append(cur, effect_id: str, kind: str, ts: float, fields: dict[str, Any]) -> dict:
    """Append one sealed entry to ``effect_id``'s chain.

    The caller holds the effect row lock (every appender locks it first), so reading the
    previous hash and inserting cannot interleave with another appender; the unique
    (effect_id, prev) constraint refuses a fork if that rule is ever broken (ReceiptChainLinear).

    Args:
        cur: a cursor inside the caller's transaction.
        ts: database clock, seconds since the epoch (from now() in this transaction).

    Returns:
        the sealed entry.
    """
    if kind not in KINDS:
        raise ValueError(f"journal kind {kind!r} is not one of {KINDS}")
    prev = cur.execute("select hash from ilr.journal where effect_id = %s order by seq desc limit 1",
                       (effect_id,)).fetchone()
    entry = seal({"kind": kind, "effect_id": effect_id, "ts": ts, "prev": prev["hash"] if prev else None,
                  **fields}, keys.signing_key())
    cur.execute("insert into ilr.journal (effect_id, kind, body, prev, hash) values (%s, %s, %s, %s, %s)",
                (effect_id, kind, codec.canonical(entry), entry["prev"], entry["hash"]))
    return entry


def entries(conn, effect_id: str) -> list[str]:
    """The stored bodies of ``effect_id``'s entries, oldest first (verbatim text)."""
    return [r["body"] for r in conn.execute(
        "select body from ilr.journal where effect_id = %s order by seq", (effect_id,)).fetchall()]


def parsed(conn, effect_id: str) -> list[dict]:
    return [json.loads(b) for b in entries(conn, effect_id)]
