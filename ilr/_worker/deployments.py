"""A worker's rows in ilr.worker_deployments: which (name, version) pairs it serves and until
when it counts as live (read by ``ilr.deployments`` LIVE_SQL and UNSERVED_SQL); and the lock
that keeps one worker id to one live process (``take_worker_id``).
"""

from __future__ import annotations

import logging
import time

import psycopg

from ilr import _db as db
from ilr._errors import InvalidInput
from ilr._queries.deployments import (
    SEEN_SQL,
    UNREGISTER_DELETE_WORKER_DEPLOYMENTS,
    WORKER_ID_HOLDERS_SQL,
    WORKER_ID_LOCK_SQL,
)
from ilr._queries.misc import TAKE_WORKER_ID_SELECT_SQL

log = logging.getLogger("ilr.worker")


WORKER_ID_WAIT = 2.0
"""Seconds a starting worker retries a taken id before refusing: the server ends the session of
a process that was just killed a moment after the process is gone."""


def take_worker_id(conn: db.Connection, worker_id: str, wait: float = WORKER_ID_WAIT) -> None:
    """Take ``worker_id``'s lock (WORKER_ID_LOCK_SQL) on ``conn``, held until ``conn`` closes.

    A holder whose worker is gone is no live worker: when every worker_deployments row of the
    id is stale (the worker stopped refreshing them; a clean exit deletes them), the session
    holding the lock is left over from a dead process (a host that died leaves its session open
    until TCP keepalive ends it) and is terminated. With no rows at all the holder is a worker
    starting or exiting, and counts as live.

    Args:
        conn: the connection to hold the lock on (the worker's listen connection).
        worker_id: the id.
        wait: seconds to retry while a live-looking holder has it.

    Raises:
        InvalidInput: field "worker_id", naming the id: another session still holds the lock
            after ``wait`` seconds.
    """
    deadline = time.monotonic() + wait
    params = {"worker": worker_id}
    while True:
        row = conn.execute(WORKER_ID_LOCK_SQL, params).fetchone()
        if row is not None and row["taken"]:
            return
        holders = conn.execute(WORKER_ID_HOLDERS_SQL, params).fetchall()
        pids = [h["pid"] for h in holders]
        if holders and holders[0]["has_rows"] and not holders[0]["live"]:
            for pid in pids:
                try:
                    conn.execute(TAKE_WORKER_ID_SELECT_SQL, (pid,))
                except psycopg.errors.InsufficientPrivilege:
                    continue  # not ours to end: refused below once the wait is over
                log.warning(
                    "%s: ended the session (pid %s) that held this worker id: every worker_deployments "
                    "row of the id is stale, so the worker that opened it is gone",
                    worker_id,
                    pid,
                )
        if time.monotonic() >= deadline:
            raise InvalidInput(
                "worker_id",
                f"{worker_id!r} is already taken by a live worker (database session pid "
                f"{', '.join(map(str, pids)) or '?'}); two processes with one id would share its claims and "
                f"worker_deployments rows: give this worker another id, or stop that worker first",
            )
        time.sleep(0.1)


def retake_worker_id(conn: db.Connection, worker_id: str) -> bool:
    """Take ``worker_id``'s lock again on a new connection of a running worker (the session
    that held it ended: a database restart, a lost connection).

    Returns:
        whether it is held now; False while another session holds it (the worker's own session
        that the server has not yet ended, or a worker started with this id meanwhile).
    """
    row = conn.execute(WORKER_ID_LOCK_SQL, {"worker": worker_id}).fetchone()
    return bool(row and row["taken"])


DEPLOYMENT_REFRESH_MIN = 5.0
"""Seconds, the shortest default period of a worker's ilr.worker_deployments refresh: the
default period is max(lease_ttl, DEPLOYMENT_REFRESH_MIN) (``Worker(deployment_refresh=...)``,
``ilr_worker --deployment-refresh``, ILR_DEPLOYMENT_REFRESH (ilr.conf) override it)."""
DEPLOYMENT_STALE_AFTER = 3
"""Refresh periods a worker_deployments row stays live: each refresh writes live_until =
now() + DEPLOYMENT_STALE_AFTER * period, and a row is live while live_until > now()."""


def seen_params(worker_id: str, definitions, refresh: float) -> dict:
    """SEEN_SQL's parameters for a worker serving ``definitions`` with a refresh every
    ``refresh`` seconds."""
    return {
        "worker": worker_id,
        "names": [d.name for d in definitions],
        "versions": [d.version for d in definitions],
        "live": DEPLOYMENT_STALE_AFTER * refresh,
    }


def refresh_deployments(conn: db.Connection | None, dsn: str, params: dict) -> db.Connection | None:
    """Mark every pair a worker serves as seen now (SEEN_SQL with ``params``, one statement) on
    its heartbeat connection ``conn`` (opened when None or closed).

    Returns:
        the connection, or None after a database error (logged; the next refresh retries).
    """
    try:
        if not db.usable(conn):
            db.discard(conn)
            conn = db.connect(dsn, application_name=f"ilr-worker-{params['worker']}-heartbeat")
        conn.execute(SEEN_SQL, params)
        return conn
    except psycopg.Error as exc:
        log.warning("%s: worker_deployments refresh failed (%s)", params["worker"], exc)
        if conn is not None:
            conn.close()
        return None


def unregister(dsn: str, worker_id: str) -> None:
    """Delete a worker's ilr.worker_deployments rows (a clean exit); a database error is logged
    and the rows go stale by themselves."""
    try:
        with db.connect(dsn, application_name=f"ilr-worker-{worker_id}") as conn:
            conn.execute(UNREGISTER_DELETE_WORKER_DEPLOYMENTS, (worker_id,))
    except psycopg.Error as exc:
        log.warning("%s: could not delete its worker_deployments rows (%s)", worker_id, exc)
