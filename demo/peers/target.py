"""The local HTTP payment target (docs/protocol.md §16.2): one process per run.

This module holds the protocol (below), the refusal every layer raises, and ``target_process``,
which runs the target as a ``manage.py demo_peer target`` subprocess. The pieces: the ledger and the
access log (demo/peers/target_ledger.py), the request handler (demo/peers/target_handler.py),
the server and its faults (demo/peers/target_server.py).

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
  ``/admin/key_conflict {answer}``, ``/admin/hold_first {seconds}``,
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
- fail_next ``{status: 500|502|400, apply: bool, save: bool}``: the next POST /refunds answers
  ``status``; with ``apply`` it is processed first (a lost success), else nothing is applied;
  with ``save`` that answer is saved for the request's key and every later POST with the key
  gets it again, processing nothing (Stripe saves a key's first result, 5xx included).
- hold_first ``{seconds}``: the first POST of each key is held ``seconds`` and then processed,
  whatever the client did meanwhile; until it ends every other POST with the key is answered
  409 ``{"error": "another request with this key is in progress", "code":
  "idempotency_key_in_use"}`` (Stripe's rule), processing nothing.

Every request is appended to the access log when it finishes: ``{"seq", "t_mono", "t_wall",
"t_done_mono", "t_done_wall", "method", "path", "query", "key", "body", "status", "applied",
"refund_id", "delay", "blackholed", "injected_failure", "response_written"}``. Times are seconds;
``t_mono`` is ``time.monotonic()`` (CLOCK_MONOTONIC, shared by every process on the machine, so
comparable with a worker's stopwatch). ``response_written`` is false when writing the answer
failed (the client had gone); true does not prove the client read it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from demo.peers.processes import parse_address, spawn_peer, stop_process


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
    """Run ``manage.py demo_peer target`` as a subprocess for the duration of the block.

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
    proc, line = spawn_peer("target", args)
    try:
        host, bound = parse_address(line)
        yield f"http://{host}:{bound}"
    finally:
        stop_process(proc)
