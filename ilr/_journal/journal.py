"""The effect journal: sealed, chained entries (docs/protocol.md §2, §9).

A sealed entry is ``{kind, effect_id, ts, prev, n, kid, ...fields, hash, sig}``: ``prev`` is the
previous entry's hash for this effect (null for the first), ``n`` its position in the chain (1
for the first), ``ts`` the database clock, ``kid`` the id of the key that signs it (absent when
unsigned), ``hash`` the sha256 of the canonical entry without hash and sig, ``sig`` an Ed25519
signature over the hash (hex) or null. The body column keeps the canonical text verbatim, and
the ``n`` column the position. PostgreSQL refuses a forked chain (unique nulls not distinct
(effect_id, prev)), a second COMMITTED (one_commit) and a second RECONCILED (one_reconcile), and
its trigger ``journal_head`` writes the chain's head (hash, n) on the effect row in the statement
that appends, so a chain that ends before its head reads as truncated (docs/protocol.md §9).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ilr import _codec as codec
from ilr._journal import keys
from ilr._queries.journal import ENTRIES_SELECT_JOURNAL, LAST_HASH_SQL, journal_insert_sql

KINDS = (
    "PROPOSED",
    "AUTHORIZED",
    "DISPATCHED",
    "RESENT",
    "COMMITTED",
    "REFUSED",
    "AMBIGUOUS",
    "LATE_RESULT",
    "RECONCILED",
)
RESERVED = ("n", "kid")
"""Fields the chain sets on every entry (its position and its key id); an appender's field of
the same name is replaced."""


def seal(entry: dict, signing_key=None) -> dict:
    """Return ``entry`` with ``hash`` and ``sig`` set."""
    unsigned = {k: v for k, v in entry.items() if k not in ("hash", "sig")}
    _, digest, sig = _sealed_text(Encoded(unsigned).parts, signing_key)
    return {**unsigned, "hash": digest, "sig": sig}


class Encoded:
    """An entry's fields with each top-level value already in canonical text.

    The canonical text of an object is its sorted members, so an entry's text can be put
    together from its members' texts: what an appender knows before its transaction reads the
    tail and the clock is encoded while that read is on the wire (issue 9), and the sealed
    body is not encoded a second time for its hash and signature.

    Args:
        fields: plain JSON values by str key (codec.canonical's rules apply to each value; a
            key that is not a str fails when the entry is put together, in Chain.append).
    """

    __slots__ = ("fields", "parts")

    def __init__(self, fields: dict[str, Any]):
        self.fields = fields
        self.parts = {k: codec.canonical(v) for k, v in fields.items()}

    def merged(self, more: dict[str, Any]) -> Encoded:
        """These fields plus ``more`` (which wins on a shared key); encodes only ``more``."""
        out = Encoded.__new__(Encoded)
        out.fields = {**self.fields, **more}
        out.parts = {**self.parts, **{k: codec.canonical(v) for k, v in more.items()}}
        return out


def _object_text(parts: dict[str, str]) -> str:
    """codec.canonical of the object whose members' canonical texts are ``parts``."""
    return "{" + ",".join(f"{codec.canonical_string(k)}:{parts[k]}" for k in sorted(parts)) + "}"


def _sealed_text(parts: dict[str, str], signing_key) -> tuple[str, str, str | None]:
    """(canonical sealed body, hash, sig) of the unsigned entry whose members are ``parts``."""
    digest = codec.sha256_hex(_object_text(parts))
    sig = signing_key.sign(digest.encode()).hex() if signing_key is not None else None
    body = _object_text({**parts, "hash": codec.canonical(digest), "sig": codec.canonical(sig)})
    return body, digest, sig


class Chain:
    """One effect's chain as seen by a transaction that holds the effect row lock.

    Every appender locks the effect row before it reads the last hash, so the hash read under
    the lock stays the chain's tail until this transaction ends: it is read once, and each
    append links to the entry before it. An append is then one INSERT whose answer nobody waits
    for, so a batched transaction (ilr.batch) sends all its entries in one round trip. The unique
    (effect_id, prev) constraint refuses a fork if the locking rule is ever broken
    (ReceiptChainLinear).

    Args:
        effect_id: the chain's effect.
        last_hash: the hash of the chain's last entry, read under the lock; None when empty.
        last_n: that entry's position (``LAST_HASH_SQL``'s ``n``); required with a last_hash.

    Raises:
        ValueError: a last_hash without its position.
    """

    def __init__(self, effect_id: str, last_hash: str | None, last_n: int | None = None):
        if last_hash is not None and last_n is None:
            raise ValueError("Chain: the tail's position (n) is required with its hash")
        self.effect_id = effect_id
        self.last_hash = last_hash
        self.last_n = last_n if last_hash is not None else 0
        self._staged: list[tuple] | None = None
        self._also: list[tuple[str, tuple]] = []

    @contextmanager
    def batched(self, cur) -> Iterator[Chain]:
        """Within the block, appends are sealed and linked at once but inserted together, in
        one statement, when the block ends without an exception (a multi-row INSERT assigns
        seq in row order). Statements staged with ``also`` run in that same statement. On an
        exception nothing is inserted; the caller's transaction rolls back anyway.
        """
        self._staged = []
        self._also = []
        try:
            yield self
            _insert(cur, self._staged, self._also)
        finally:
            self._staged = None
            self._also = []

    def also(self, sql: str, params: tuple) -> None:
        """Inside ``batched``: run the data-modifying statement ``sql`` (an UPDATE or INSERT
        without RETURNING, with %s placeholders) as part of the block's one INSERT, as a CTE.

        One statement instead of two saves its round trip share and its parse and bind on the
        effect path (issue 9). Its CTE and the journal INSERT see the same snapshot, so ``sql``
        must not read rows this block's entries write, nor write a row another staged
        statement writes; it may fail the whole statement like any CTE (a constraint, a
        trigger), which rolls the caller's transaction back.

        Raises:
            RuntimeError: called outside ``batched``.
        """
        if self._staged is None:
            raise RuntimeError("Chain.also is only for statements inside Chain.batched")
        self._also.append((sql, params))

    @classmethod
    def read(cls, cur, effect_id: str) -> Chain:
        """Read the tail with ``cur`` (inside the caller's transaction, after the lock)."""
        return cls.after(effect_id, cur.execute(LAST_HASH_SQL, (effect_id,)).fetchone())

    @classmethod
    def after(cls, effect_id: str, tail: dict | None) -> Chain:
        """The chain whose tail is ``tail``, a row of ``LAST_HASH_SQL`` (None: an empty chain)."""
        return cls(effect_id, tail["hash"], tail["n"]) if tail else cls(effect_id, None)

    def append(self, cur, kind: str, ts: float, fields: dict[str, Any] | Encoded) -> dict:
        """Seal and insert one entry after the current tail; returns the sealed entry.

        Args:
            cur: a cursor inside the caller's transaction, or its ilr._db.batch.Batch.
            kind: one of KINDS. ts: database clock, seconds since the epoch (now() of this
                transaction).
            fields: the kind's fields, as a dict or already Encoded.

        Raises:
            ValueError: an unknown kind.
        """
        if kind not in KINDS:
            raise ValueError(f"journal kind {kind!r} is not one of {KINDS}")
        encoded = fields if isinstance(fields, Encoded) else Encoded(fields)
        head = {"kind": kind, "effect_id": self.effect_id, "ts": ts, "prev": self.last_hash}
        signing_key = keys.signing_key()
        n = (self.last_n or 0) + 1
        # The position and the key id are the chain's, whatever the fields say (RESERVED).
        chained: dict[str, Any] = {"n": n}
        if signing_key is not None:
            chained["kid"] = keys.current_key_id()
        # The fields win over the head on a shared key, as in {**head, **fields}.
        parts = {
            **{k: codec.canonical(v) for k, v in head.items()},
            **{k: v for k, v in encoded.parts.items() if k not in RESERVED},
            **{k: codec.canonical(v) for k, v in chained.items()},
        }
        parts.pop("hash", None)  # as seal(): a field named hash or sig is not sealed
        parts.pop("sig", None)
        body, digest, sig = _sealed_text(parts, signing_key)
        own = {k: v for k, v in encoded.fields.items() if k not in RESERVED}
        entry = {**head, **own, **chained, "hash": digest, "sig": sig}
        row = (self.effect_id, kind, body, entry["prev"], digest, n)
        if self._staged is not None:
            self._staged.append(row)
        else:
            _insert(cur, [row])
        self.last_hash = entry["hash"]
        self.last_n = n
        return entry


def _insert(cur, rows: list[tuple], also: Sequence[tuple[str, tuple]] = ()) -> None:
    """One INSERT of ``rows`` (effect_id, kind, body, prev, hash, n), with the ``also``
    statements as data-modifying CTEs ahead of it; with no rows, the ``also`` statements alone.
    The trigger journal_head writes the chain's head on the effect row after this statement."""
    if not rows:
        for sql, params in also:
            cur.execute(sql, params)
        return
    cur.execute(
        journal_insert_sql([sql for sql, _ in also], len(rows)),
        [v for _, params in also for v in params] + [v for row in rows for v in row],
    )


def append(cur, effect_id: str, kind: str, ts: float, fields: dict[str, Any]) -> dict:
    """Append one sealed entry to ``effect_id``'s chain (reads the tail, then inserts).

    The caller holds the effect row lock (every appender locks it first), so reading the
    previous hash and inserting cannot interleave with another appender. See Chain for
    several entries in one transaction.

    Args:
        cur: a cursor inside the caller's transaction.
        ts: database clock, seconds since the epoch (from now() in this transaction).

    Returns:
        the sealed entry.
    """
    return Chain.read(cur, effect_id).append(cur, kind, ts, fields)


def entries(conn, effect_id: str) -> list[str]:
    """The stored bodies of ``effect_id``'s entries, oldest first (verbatim text)."""
    return [r["body"] for r in conn.execute(ENTRIES_SELECT_JOURNAL, (effect_id,)).fetchall()]


def parsed(conn, effect_id: str) -> list[dict]:
    return [json.loads(b) for b in entries(conn, effect_id)]
