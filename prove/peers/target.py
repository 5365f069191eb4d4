"""The local HTTP payment target (docs/protocol.md §16.2): one process per run.

A stdlib ``ThreadingHTTPServer`` over a SQLite ledger, with a JSON-lines access log. It stands in
for Stripe so every fault the Prove scenarios need can be injected on purpose, and it is the
oracle's ground truth: the ledger says what was applied, the access log says what arrived.

Payments have an ``id`` (a string; integer ids are accepted and stored as their decimal string)
and ``paid`` (cents). Refunds are ledger rows ``(id, payment, amount, key, effect_id, source,
applied_at, applied_mono)``; ``source`` is ``'api'`` (POST /refunds) or ``'hand'`` (an operator's
refund, EMULATED through /admin/hand_refund).

Tiers (a server setting; assumption A4, docs/protocol.md §10):

- tier 1: POST /refunds with an ``Idempotency-Key`` dedupes. The same key within the dedup window
  returns the stored refund (200, ``"already_processed": true``) and applies nothing; the same key
  with different parameters is refused with 409. GET /refunds?key=K answers only when the server
  was started ``queryable`` (Stripe-like lookup), else 404 ``{"error": "no lookup"}``.
- tier 2: no dedup (every POST applies) but GET /refunds?key=K answers truthfully.
- tier 3: no dedup and no lookup.

Endpoints:

- ``POST /refunds`` body ``{"payment", "amount", "effect_id"}``, header ``Idempotency-Key``.
  200 ``{"id", "payment", "amount", "key", "effect_id", "source", "applied_at", "status":
  "succeeded", "already_processed"}``. Refused with nothing applied: 400 (malformed body, amount
  not a positive integer, unknown payment), 402 (amount exceeds paid minus refunded), 409 (tier 1
  key reused with different parameters).
- ``GET /refunds?key=K``: the first refund carrying key K plus ``"matches"`` (how many carry it),
  404 ``{"error": "not found"}``, or 404 ``{"error": "no lookup"}`` when the tier has none.
- ``GET /payments/<id>[?effect_id=E]``: ``{"payment", "paid", "refunded_total",
  "refunded_by_others", "eligible"}``; ``refunded_by_others`` counts refunds whose effect id and
  key both differ from E (null without ``effect_id``); ``eligible`` is ``refunded_total < paid``.
  With ``effect_id`` it also returns ``"eligible_excluding_effect"`` (``refunded_by_others <
  paid``), the eligibility as it was before this effect's own refund.
- Fault and admin endpoints (POST, JSON; all faults EMULATED): ``/admin/payments {id, paid}``,
  ``/admin/delay {seconds}``, ``/admin/blackhole {on}``, ``/admin/prune_keys``,
  ``/admin/hand_refund {payment, amount}``, ``/admin/fail_next {status, apply}``,
  ``/admin/key_conflict {answer}``,
  ``/admin/reset`` (payments, refunds, keys, faults and the access log; the reset request is
  the first entry of the emptied log). ``GET /ledger``, ``GET /access_log``, ``GET /health``.

Faults, precisely:

- delay: every POST /refunds sleeps ``seconds`` after it arrives and before it is processed. The
  request is processed after the sleep even when the client has already given up: that is how
  late applications happen (scenarios S08a to S08c).
- blackhole: a POST /refunds arriving while it is on is read, applies nothing, and gets no
  answer; the connection is held open until the blackhole is turned off, the client disconnects,
  or the server stops, and is then closed without a response.
- prune_keys: forgets every stored idempotency key, so an old key applies again (EMULATED key
  expiry, standing in for Stripe's 24 h pruning; scenario S04). Lookups still find old refunds:
  they read the ledger, not the key store.
- key_conflict ``{answer: "409"|"400"|"replay"}``: how tier 1 answers a stored key arriving with
  other parameters: 409 (the default), 400 (Stripe's idempotency_error), or the stored refund
  replayed as if the parameters matched (providers that key on the header alone). Nothing is
  applied in any of the three.
- fail_next ``{status: 500|502|400, apply: bool}``: the next POST /refunds answers ``status``;
  with ``apply`` it is processed first (a lost success), else nothing is applied.

Every request is appended to the access log when it finishes: ``{"seq", "t_mono", "t_wall",
"t_done_mono", "t_done_wall", "method", "path", "query", "key", "body", "status", "applied",
"refund_id", "delay", "blackholed", "injected_failure", "response_written"}``. Times are seconds;
``t_mono`` is ``time.monotonic()`` (CLOCK_MONOTONIC, shared by every process on the machine, so
comparable with a worker's stopwatch). ``response_written`` is false when writing the answer
failed (the client had gone); true does not prove the client read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import select
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from prove.peers.processes import parse_address, spawn_subcommand, stop_process

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


class Refused(Exception):
    """A request refused with nothing applied.

    Attributes:
        status: the HTTP status (400, 402, 404, 409).
        error: a plain sentence for the JSON ``error`` field.
    """

    def __init__(self, status: int, error: str):
        self.status = status
        self.error = error
        super().__init__(f"{status}: {error}")


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
        refunded = db.execute(
            "select coalesce(sum(amount), 0) from refunds where payment = ?", (pid,)
        ).fetchone()[0]
        if refunded + amount > row["paid"]:
            raise Refused(
                402,
                f"amount {amount} exceeds what is left to refund on {pid} "
                f"({row['paid'] - refunded})",
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
                    "insert into idem_keys (key, refund_id, request_hash, stored_at)"
                    " values (?, ?, ?, ?)",
                    (key, refund["id"], _request_hash(pid, amount), time.time()),
                )
            return refund, True

    def hand_refund(self, payment_id, amount) -> dict:
        """Record an operator's refund (source 'hand', no key).

        Raises:
            Refused: 400 or 402 as for an API refund; nothing applied.
        """
        with self._tx() as db:
            return self._insert_refund(
                db, _payment_id(payment_id), _amount(amount), None, None, "hand"
            )

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
            return [
                dict(r)
                for r in self._db.execute(
                    f"select {', '.join(REFUND_COLUMNS)} from refunds order by seq"
                )
            ]

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


class Faults:
    """The injected faults (all EMULATED): delay, blackhole, one-shot failure, key conflicts."""

    def __init__(self):
        self._lock = threading.Lock()
        self.delay = 0.0
        self.fail_next: dict | None = None
        self.key_conflict = "409"
        # Set while the blackhole is OFF, so held handlers can simply wait on it.
        self.open = threading.Event()
        self.open.set()

    @property
    def blackhole(self) -> bool:
        return not self.open.is_set()

    def set_blackhole(self, on: bool) -> None:
        if on:
            self.open.clear()
        else:
            self.open.set()

    def take_fail_next(self) -> dict | None:
        with self._lock:
            failure, self.fail_next = self.fail_next, None
            return failure

    def reset(self) -> None:
        with self._lock:
            self.delay = 0.0
            self.fail_next = None
            self.key_conflict = "409"
        self.open.set()


class TargetServer(ThreadingHTTPServer):
    """The HTTP server with its ledger, access log, faults and tier settings.

    Args:
        address: (host, port); port 0 picks a free port.
        tier: 1, 2 or 3.
        queryable: tier 1 only: answer lookups. Tier 2 always answers, tier 3 never.
        ledger: the SQLite file.
        access_log: the JSON-lines file.
        dedup_window: tier 1: seconds a key counts; None or inf: until prune_keys.

    Raises:
        ValueError: a tier outside 1..3, or queryable with tier 3 (which has no lookup by
            definition).
    """

    # socketserver's default listen backlog is 5. Sixteen workflows connecting at once overflow
    # it, and the kernel drops the SYNs past it: the client retries after 1 s, 3 s, 7 s, so a
    # send could time out before it was ever accepted (seen as TcpExtListenOverflows).
    request_queue_size = 128
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        tier: int,
        queryable: bool,
        ledger: str | Path,
        access_log: str | Path,
        dedup_window: float | None = None,
    ):
        if tier not in (1, 2, 3):
            raise ValueError(f"tier must be 1, 2 or 3, not {tier!r}")
        if tier == 3 and queryable:
            raise ValueError("tier 3 has no lookup; --queryable applies to tier 1 only")
        self.tier = tier
        self.queryable = tier == 2 or (tier == 1 and queryable)
        self.dedup_window = math.inf if dedup_window is None else float(dedup_window)
        self.ledger = Ledger(ledger)
        self.log = AccessLog(access_log)
        self.faults = Faults()
        self.stopping = threading.Event()
        super().__init__(address, TargetHandler)

    def settings(self) -> dict:
        return {
            "tier": self.tier,
            "queryable": self.queryable,
            "dedup_window": None if math.isinf(self.dedup_window) else self.dedup_window,
            "delay": self.faults.delay,
            "blackhole": self.faults.blackhole,
            "fail_next": self.faults.fail_next,
            "key_conflict": self.faults.key_conflict,
            "ledger": self.ledger.path,
            "access_log": self.log.path,
        }

    def close(self) -> None:
        """Release held requests, stop listening, close the files."""
        self.stopping.set()
        self.faults.open.set()
        self.server_close()
        self.ledger.close()
        self.log.close()


class TargetHandler(BaseHTTPRequestHandler):
    server: TargetServer
    # HTTP/1.0: one request per connection, so a held or late request never blocks another.
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):
        # The JSON-lines access log is the record; stderr stays quiet.
        pass

    # -- plumbing ----------------------------------------------------------------------------

    def _start(self) -> None:
        self.t_mono, self.t_wall = time.monotonic(), time.time()
        parts = urlsplit(self.path)
        self.route = unquote(parts.path).rstrip("/") or "/"
        self.query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.raw_body = b""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.raw_body = self.rfile.read(length)
        self.entry = {
            "method": self.command,
            "path": self.route,
            "query": self.query or None,
            "key": self.headers.get("Idempotency-Key"),
            "body": self._body_for_log(),
            "status": None,
            "applied": False,
            "refund_id": None,
            "delay": 0.0,
            "blackholed": False,
            "injected_failure": None,
            "response_written": False,
        }

    def _body_for_log(self):
        if not self.raw_body:
            return None
        try:
            return json.loads(self.raw_body)
        except ValueError:
            return self.raw_body.decode("utf-8", "replace")

    def _json_body(self) -> dict:
        if not self.raw_body:
            return {}
        try:
            body = json.loads(self.raw_body)
        except ValueError:
            raise Refused(400, "body is not JSON") from None
        if not isinstance(body, dict):
            raise Refused(400, "body must be a JSON object")
        return body

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload, default=str).encode()
        self.entry["status"] = status
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self.entry["response_written"] = True
        except OSError:
            # The client gave up (timeout, watchdog exit): the outcome stands, only the answer
            # is lost. The access log says so.
            self.entry["response_written"] = False

    def _finish(self) -> None:
        self.entry["t_mono"], self.entry["t_wall"] = self.t_mono, self.t_wall
        self.entry["t_done_mono"], self.entry["t_done_wall"] = time.monotonic(), time.time()
        try:
            self.server.log.append(self.entry)
        except ValueError:
            pass  # the log was closed by shutdown while this request was held

    def _dispatch(self, routes: dict[str, Callable[[], None]]) -> None:
        self._start()
        try:
            handler = routes.get(self.route)
            if handler is None:
                if self.command == "GET" and self.route.startswith("/payments/"):
                    handler = self._get_payment
                else:
                    raise Refused(404, f"no route {self.command} {self.route}")
            handler()
        except Refused as exc:
            self._send(exc.status, {"error": exc.error})
        except Exception as exc:  # noqa: BLE001 - a server bug must still answer and be logged
            self._send(500, {"error": f"internal error: {type(exc).__name__}: {exc}"})
        finally:
            self._finish()

    def do_GET(self):
        self._dispatch(
            {
                "/refunds": self._get_refunds,
                "/ledger": lambda: self._send(
                    200,
                    {"rows": self.server.ledger.rows(), "payments": self.server.ledger.payments()},
                ),
                "/access_log": lambda: self._send(200, {"entries": self.server.log.entries()}),
                "/health": lambda: self._send(200, {"ok": True, **self.server.settings()}),
            }
        )

    def do_POST(self):
        self._dispatch(
            {
                "/refunds": self._post_refunds,
                "/admin/payments": self._admin_payments,
                "/admin/delay": self._admin_delay,
                "/admin/blackhole": self._admin_blackhole,
                "/admin/prune_keys": self._admin_prune_keys,
                "/admin/hand_refund": self._admin_hand_refund,
                "/admin/fail_next": self._admin_fail_next,
                "/admin/key_conflict": self._admin_key_conflict,
                "/admin/reset": self._admin_reset,
            }
        )

    # -- the payment API ---------------------------------------------------------------------

    def _post_refunds(self) -> None:
        srv = self.server
        if srv.faults.blackhole:
            self.entry["blackholed"] = True
            self._hold()
            self.close_connection = True
            return
        failure = srv.faults.take_fail_next()
        delay = srv.faults.delay
        self.entry["delay"] = delay
        if delay > 0:
            # Processed after the sleep whatever the client did meanwhile: a late application.
            time.sleep(delay)
        self.entry["injected_failure"] = failure
        if failure is not None and not failure["apply"]:
            self._send(failure["status"], {"error": "injected failure (EMULATED)"})
            return
        try:
            body = self._json_body()
            if "payment" not in body or "amount" not in body:
                raise Refused(400, "body needs payment and amount")
            refund, applied = srv.ledger.refund(
                body["payment"],
                body["amount"],
                key=self.entry["key"],
                effect_id=body.get("effect_id"),
                dedup=srv.tier == 1,
                dedup_window=srv.dedup_window,
                key_conflict=srv.faults.key_conflict,
            )
        except Refused:
            if failure is None:
                raise
            refund, applied = None, False
        self.entry["applied"] = applied
        self.entry["refund_id"] = refund["id"] if refund else None
        if failure is not None:
            self._send(failure["status"], {"error": "injected failure (EMULATED)"})
            return
        self._send(200, {**refund, "status": "succeeded", "already_processed": not applied})

    def _hold(self) -> None:
        """Hold a blackholed request: no answer until the blackhole opens, the client leaves,
        or the server stops."""
        srv = self.server
        while not srv.faults.open.wait(0.1) and not srv.stopping.is_set():
            if self._client_gone():
                return

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _get_refunds(self) -> None:
        if not self.server.queryable:
            raise Refused(404, "no lookup")
        key = self.query.get("key")
        if not key:
            raise Refused(400, "key required: GET /refunds?key=K")
        found = self.server.ledger.lookup(key)
        if found is None:
            raise Refused(404, "not found")
        self._send(200, found)

    def _get_payment(self) -> None:
        pid = self.route[len("/payments/") :]
        self._send(200, self.server.ledger.payment(pid, self.query.get("effect_id")))

    # -- admin (all EMULATED faults or fixtures) ---------------------------------------------

    def _admin_payments(self) -> None:
        body = self._json_body()
        result = self.server.ledger.create_payment(body.get("id"), body.get("paid"))
        self._send(200 if not result["created"] else 201, result)

    def _admin_delay(self) -> None:
        seconds = self._json_body().get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise Refused(400, "seconds must be a non-negative number")
        self.server.faults.delay = float(seconds)
        self._send(200, {"delay": float(seconds)})

    def _admin_blackhole(self) -> None:
        on = self._json_body().get("on")
        if not isinstance(on, bool):
            raise Refused(400, "on must be true or false")
        self.server.faults.set_blackhole(on)
        self._send(200, {"blackhole": on})

    def _admin_prune_keys(self) -> None:
        self._send(200, {"pruned": self.server.ledger.prune_keys()})

    def _admin_hand_refund(self) -> None:
        body = self._json_body()
        refund = self.server.ledger.hand_refund(body.get("payment"), body.get("amount"))
        self.entry["applied"], self.entry["refund_id"] = True, refund["id"]
        self._send(200, refund)

    def _admin_fail_next(self) -> None:
        body = self._json_body()
        status, apply = body.get("status"), body.get("apply", False)
        if status not in (400, 500, 502) or not isinstance(apply, bool):
            raise Refused(400, "status must be 400, 500 or 502 and apply true or false")
        self.server.faults.fail_next = {"status": status, "apply": apply}
        self._send(200, {"fail_next": self.server.faults.fail_next})

    def _admin_key_conflict(self) -> None:
        answer = self._json_body().get("answer")
        if answer not in ("409", "400", "replay"):
            raise Refused(400, 'answer must be "409", "400" or "replay"')
        self.server.faults.key_conflict = answer
        self._send(200, {"key_conflict": answer})

    def _admin_reset(self) -> None:
        self.server.faults.reset()
        self.server.ledger.reset()
        self.server.log.truncate()
        self._send(200, {"reset": True})


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tier: int,
    queryable: bool = False,
    ledger: str | Path,
    access_log: str | Path | None = None,
    dedup_window: float | None = None,
    ready: Callable[[str], None] = print,
) -> None:
    """Run the target until KeyboardInterrupt (SIGTERM in ``manage.py prove target``).

    Args:
        host, port: where to listen; port 0 picks a free port.
        tier, queryable, dedup_window: see TargetServer.
        ledger: the SQLite file.
        access_log: the JSON-lines file; default ``<ledger>.access.jsonl``.
        ready: called once with ``"listening HOST:PORT"`` when accepting connections.
    """
    access_log = access_log or f"{ledger}.access.jsonl"
    server = TargetServer(
        (host, port),
        tier=tier,
        queryable=queryable,
        ledger=ledger,
        access_log=access_log,
        dedup_window=dedup_window,
    )
    try:
        ready(f"listening {host}:{server.server_address[1]}")
        server.serve_forever(poll_interval=0.2)
    finally:
        server.close()


@contextlib.contextmanager
def target_process(
    *,
    tier: int,
    ledger: str | Path,
    queryable: bool = False,
    access_log: str | Path | None = None,
    dedup_window: float | None = None,
    port: int = 0,
) -> Iterator[str]:
    """Run ``manage.py prove target`` as a subprocess for the duration of the block.

    Args:
        tier: 1, 2 or 3.
        ledger: the SQLite file (its directory must exist).
        queryable: tier 1 lookup.
        access_log: the JSON-lines file; default ``<ledger>.access.jsonl``.
        dedup_window: tier 1 key lifetime in seconds; None: until prune_keys.
        port: 0 picks a free port.

    Yields:
        The base URL, e.g. "http://127.0.0.1:40123". The process is stopped (SIGTERM, then
        SIGKILL) on exit.
    """

    args = ["--port", str(port), "--tier", str(tier), "--ledger", os.fspath(ledger)]
    if queryable:
        args.append("--queryable")
    if access_log is not None:
        args += ["--access-log", os.fspath(access_log)]
    if dedup_window is not None:
        args += ["--dedup-window", str(dedup_window)]
    proc, line = spawn_subcommand("target", args)
    try:
        host, bound = parse_address(line)
        yield f"http://{host}:{bound}"
    finally:
        stop_process(proc)
