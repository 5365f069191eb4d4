"""A worker's backstop for concurrency keys: admit waiters into free slots now and then
(docs/protocol.md §5.4).

A release admits the next waiter in its own transaction, so a free slot with a waiter is left
only when that waiter's row was locked by a cancel that then rolled back (the release passes a
locked waiter over rather than wait for it). The heartbeat thread runs this at each
worker_deployments refresh.
"""

from __future__ import annotations

import logging

import psycopg

from ilr import _db as db
from ilr._queries.slots import ADMIT_WAITERS

log = logging.getLogger("ilr.worker")


def admit_stranded(conn: db.Connection | None, worker_id: str) -> list[str]:
    """Admit every waiter that a free slot of its key fits, on the heartbeat connection ``conn``.

    Returns:
        the workflows admitted ([] when none, when ``conn`` is None, or after a database error,
        which is logged; the next refresh retries).
    """
    if conn is None or not db.usable(conn):
        return []
    try:
        admitted = [r["workflow_id"] for r in conn.execute(ADMIT_WAITERS).fetchall()]
    except psycopg.Error as exc:
        log.warning("%s: admitting stranded waiters failed (%s)", worker_id, exc)
        return []
    if admitted:
        log.info("%s: admitted %d stranded waiter(s): %s", worker_id, len(admitted), ", ".join(admitted))
    return admitted
