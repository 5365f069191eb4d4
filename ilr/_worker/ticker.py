"""A worker's schedule thread: every ``poll`` seconds (at least TICK_EVERY_MIN), the tick
transaction (``ilr._schedules.ticks``; docs/protocol.md §5.8) on its own connection. Every worker
runs one: no leader, and a schedule's row lock (skip locked) keeps two workers off one schedule at
once."""

from __future__ import annotations

import logging
from typing import Any

import psycopg

from ilr import _db as db
from ilr._schedules.ticks import tick_in

log = logging.getLogger("ilr.worker")

BATCH = 100
"""Schedules one tick transaction handles; a full batch is followed by the next at once."""

TICK_EVERY_MIN = 0.2
"""Seconds between two tick transactions of one worker, at the least. A worker polling faster
for work (``--poll 0.05``) would otherwise spend a transaction per poll on schedules, whose
ticks are whole seconds: a tick is then at most this late, plus its jitter."""


def ticker_loop(worker: Any) -> None:
    """The schedule thread of ``worker`` (an ``ilr.Worker``), until it stops. A database fault
    (logged at DEBUG: the claim loop announces an outage) skips a turn (the transaction rolled
    back: the next turn, here or on another worker, redoes it); any other error is logged with
    its traceback and retried next turn."""
    conn = None
    while not worker.stopping():
        full = False
        try:
            if not db.usable(conn):
                db.discard(conn)
                conn = db.connect(worker.dsn, application_name=f"ilr-worker-{worker.worker_id}-ticker")
            with conn.transaction():
                full = tick_in(conn, BATCH) >= BATCH
        except psycopg.Error as exc:
            if not db.is_connection_fault(exc):
                log.exception("%s: schedule tick failed", worker.worker_id)
            else:
                # A lost database is the claim loop's to announce, once per outage (ClaimBackoff):
                # a line per tick here would repeat it every poll for as long as it lasts.
                log.debug("%s: schedule tick failed (%s)", worker.worker_id, exc)
            db.discard(conn)
            conn = None
        except Exception:
            log.exception("%s: schedule tick failed", worker.worker_id)
        if not full:
            worker.wait_stop(max(worker.poll, TICK_EVERY_MIN))
    db.discard(conn)
