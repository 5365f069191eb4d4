"""The payment target's records (demo/peers/target.py describes the protocol): the SQLite
ledger of payments, refunds and idempotency keys, and the JSON-lines access log."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from demo.peers.target import Refused

SCHEMA = """
create table if not exists payments (
    id          text primary key,
    paid        integer not null check (paid >= 0),
    created_at  real not null
);
create table if not exists refunds (
    seq           integer primary key autoincrement,
    id            text unique,
    payment       text not null references payments(id),
    amount        integer not null check (amount > 0),
    key           text,
    effect_id     text,
    source        text not null check (source in ('api', 'hand')),
    applied_at    real not null,
    applied_mono  real not null
);
create index if not exists refunds_key on refunds(key);
create index if not exists refunds_payment on refunds(payment);
create table if not exists idem_keys (
    key           text primary key,
    refund_id     text not null,
    request_hash  text not null,
    stored_at     real not null
);
"""

REFUND_COLUMNS = (
    "id",
    "payment",
    "amount",
    "key",
    "effect_id",
    "source",
    "applied_at",
    "applied_mono",
)


def _payment_id(value) -> str:
    # Integer ids are accepted for convenience and stored as text so one payment has one id.
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise Refused(400, "payment must be a non-empty string or an integer")
    return str(value)


def _amount(value) -> int:
    # bool is an int subclass in Python; True must not refund one cent.
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(400, "amount must be an integer number of cents")
    if value <= 0:
        raise Refused(400, "amount must be positive")
    return value


def _request_hash(payment: str, amount: int) -> str:
    return hashlib.sha256(json.dumps([payment, amount]).encode()).hexdigest()


class Ledger:
    """The SQLite ledger: payments, refunds and (tier 1) stored idempotency keys.

    One connection guarded by one lock: every check-then-apply runs whole under the lock, so two
    concurrent requests with one key cannot both apply (A4 at tier 1).

    Args:
        path: the SQLite file; created with its schema when absent.
    """

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        # WAL lets an oracle read the file while the server writes; FULL syncs every commit so
        # a row in the ledger is a row on disk.
        self._db.execute("pragma journal_mode=wal")
        self._db.execute("pragma synchronous=full")
        self._db.execute("pragma foreign_keys=on")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("begin immediate")
            try:
                yield self._db
            except BaseException:
                self._db.execute("rollback")
                raise
            self._db.execute("commit")

    # -- payments ----------------------------------------------------------------------------

    def create_payment(self, payment_id, paid) -> dict:
        """Create a payment; repeating the same (id, paid) is a no-op.

        Args:
            payment_id: str or int.
            paid: cents, a non-negative integer.

        Returns:
            {"payment", "paid", "created"}.

        Raises:
            Refused: 400 for bad input, 409 when the id exists with a different paid.
        """
        pid = _payment_id(payment_id)
        if isinstance(paid, bool) or not isinstance(paid, int) or paid < 0:
            raise Refused(400, "paid must be a non-negative integer number of cents")
        with self._tx() as db:
            row = db.execute("select paid from payments where id = ?", (pid,)).fetchone()
            if row is not None:
                if row["paid"] != paid:
                    raise Refused(409, f"payment {pid} exists with paid {row['paid']}")
                return {"payment": pid, "paid": paid, "created": False}
            db.execute(
                "insert into payments (id, paid, created_at) values (?, ?, ?)",
                (pid, paid, time.time()),
            )
        return {"payment": pid, "paid": paid, "created": True}

    def payment(self, payment_id, effect_id: str | None = None) -> dict:
        """The payment's facts as GET /payments/<id> reports them (see module docstring).

        Raises:
            Refused: 404 when the payment does not exist.
        """
        pid = _payment_id(payment_id)
        with self._lock:
            row = self._db.execute("select paid from payments where id = ?", (pid,)).fetchone()
            if row is None:
                raise Refused(404, f"no payment {pid}")
            total = self._db.execute(
                "select coalesce(sum(amount), 0) from refunds where payment = ?", (pid,)
            ).fetchone()[0]
            others = None
            if effect_id is not None:
                others = self._db.execute(
                    "select coalesce(sum(amount), 0) from refunds where payment = ? "
                    "and coalesce(effect_id, '') <> ? and coalesce(key, '') <> ?",
                    (pid, effect_id, effect_id),
                ).fetchone()[0]
        out = {
            "payment": pid,
            "paid": row["paid"],
            "refunded_total": total,
            "refunded_by_others": others,
            "eligible": total < row["paid"],
        }
        if others is not None:
            out["eligible_excluding_effect"] = others < row["paid"]
        return out

    # -- refunds -----------------------------------------------------------------------------

    def _insert_refund(self, db, pid: str, amount: int, key, effect_id, source: str) -> dict:
        row = db.execute("select paid from payments where id = ?", (pid,)).fetchone()
        if row is None:
            raise Refused(400, f"no payment {pid}")
        refunded = db.execute("select coalesce(sum(amount), 0) from refunds where payment = ?", (pid,)).fetchone()[0]
        if refunded + amount > row["paid"]:
            raise Refused(
                402,
                f"amount {amount} exceeds what is left to refund on {pid} ({row['paid'] - refunded})",
            )
        now, mono = time.time(), time.monotonic()
        cur = db.execute(
            "insert into refunds"
            " (payment, amount, key, effect_id, source, applied_at, applied_mono)"
            " values (?, ?, ?, ?, ?, ?, ?)",
            (pid, amount, key, effect_id, source, now, mono),
        )
        refund_id = f"re_{cur.lastrowid:06d}"
        db.execute("update refunds set id = ? where seq = ?", (refund_id, cur.lastrowid))
        return {
            "id": refund_id,
            "payment": pid,
            "amount": amount,
            "key": key,
            "effect_id": effect_id,
            "source": source,
            "applied_at": now,
            "applied_mono": mono,
        }

    def refund(
        self,
        payment_id,
        amount,
        *,
        key: str | None,
        effect_id: str | None,
        dedup: bool,
        dedup_window: float,
        key_conflict: str = "409",
    ) -> tuple[dict, bool]:
        """Apply one API refund, or replay the stored one for a known key.

        Args:
            payment_id: str or int.
            amount: cents.
            key: the Idempotency-Key header, or None.
            effect_id: the body's effect_id, or None.
            dedup: tier 1: consult and store idempotency keys.
            dedup_window: seconds a stored key counts (math.inf: until pruned).
            key_conflict: the answer to a stored key with other parameters: "409", "400" or
                "replay" (see the module docstring).

        Returns:
            (refund row, applied). applied is False when a stored key replayed its refund.

        Raises:
            Refused: nothing was applied (400, 402, 409).
        """
        if effect_id is not None and not isinstance(effect_id, str):
            raise Refused(400, "effect_id must be a string")
        if key is not None and key == "":
            key = None
        with self._tx() as db:
            # A replay is answered before validation, as Stripe does: once a key has applied,
            # "amount exceeds what is left" must not turn the retry of that same refund into a no.
            if dedup and key is not None:
                stored = db.execute(
                    "select refund_id, request_hash, stored_at from idem_keys where key = ?", (key,)
                ).fetchone()
                if stored is not None and time.time() - stored["stored_at"] > dedup_window:
                    db.execute("delete from idem_keys where key = ?", (key,))
                    stored = None
                if stored is not None:
                    pid = _payment_id(payment_id)
                    if stored["request_hash"] != _request_hash(pid, amount) and key_conflict != "replay":
                        raise Refused(int(key_conflict), "idempotency key reused with different parameters")
                    row = db.execute(
                        f"select {', '.join(REFUND_COLUMNS)} from refunds where id = ?",
                        (stored["refund_id"],),
                    ).fetchone()
                    return dict(row), False
            pid = _payment_id(payment_id)
            refund = self._insert_refund(db, pid, _amount(amount), key, effect_id, "api")
            if dedup and key is not None:
                db.execute(
                    "insert into idem_keys (key, refund_id, request_hash, stored_at) values (?, ?, ?, ?)",
                    (key, refund["id"], _request_hash(pid, amount), time.time()),
                )
            return refund, True

    def hand_refund(self, payment_id, amount) -> dict:
        """Record an operator's refund (source 'hand', no key).

        Raises:
            Refused: 400 or 402 as for an API refund; nothing applied.
        """
        with self._tx() as db:
            return self._insert_refund(db, _payment_id(payment_id), _amount(amount), None, None, "hand")

    def lookup(self, key: str) -> dict | None:
        """The first refund carrying ``key`` plus ``"matches"``, or None."""
        with self._lock:
            rows = self._db.execute(
                f"select {', '.join(REFUND_COLUMNS)} from refunds where key = ? order by seq",
                (key,),
            ).fetchall()
        if not rows:
            return None
        return {**dict(rows[0]), "matches": len(rows)}

    def prune_keys(self) -> int:
        """Forget every stored idempotency key; returns how many were forgotten."""
        with self._tx() as db:
            return db.execute("delete from idem_keys").rowcount

    def rows(self) -> list[dict]:
        """Every refund row, in application order."""
        with self._lock:
            return [dict(r) for r in self._db.execute(f"select {', '.join(REFUND_COLUMNS)} from refunds order by seq")]

    def payments(self) -> list[dict]:
        with self._lock:
            return [dict(r) for r in self._db.execute("select id, paid from payments order by id")]

    def reset(self) -> None:
        """Delete every payment, refund and key."""
        with self._tx() as db:
            db.execute("delete from idem_keys")
            db.execute("delete from refunds")
            db.execute("delete from payments")


class AccessLog:
    """An append-only JSON-lines file; each line is flushed as written, so it survives SIGKILL.

    Args:
        path: the log file (appended to when it exists).
    """

    def __init__(self, path: str | Path):
        self.path = str(path)
        self._lock = threading.Lock()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the server
        with open(self.path, encoding="utf-8") as existing:
            self._seq = sum(1 for _ in existing)

    def append(self, entry: dict) -> None:
        with self._lock:
            self._seq += 1
            self._file.write(json.dumps({"seq": self._seq, **entry}, default=str) + "\n")
            self._file.flush()

    def entries(self) -> list[dict]:
        with self._lock, open(self.path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def truncate(self) -> None:
        with self._lock:
            self._file.truncate(0)
            self._file.seek(0)
            self._seq = 0

    def close(self) -> None:
        with self._lock:
            self._file.close()
