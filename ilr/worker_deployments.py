"""A worker's rows in ilr.worker_deployments: which (name, version) pairs it serves and until
when it counts as live (read by ``ilr.deployments`` LIVE_SQL and UNSERVED_SQL).
"""

from __future__ import annotations

import logging

import psycopg

from ilr import db

log = logging.getLogger("ilr.worker")

DEPLOYMENT_REFRESH_MIN = 5.0
"""Seconds, the shortest default period of a worker's ilr.worker_deployments refresh: the
default period is max(lease_ttl, DEPLOYMENT_REFRESH_MIN) (``Worker(deployment_refresh=...)``,
``ilr_worker --deployment-refresh``, ILR_DEPLOYMENT_REFRESH (ilr.conf) override it)."""
DEPLOYMENT_STALE_AFTER = 3
"""Refresh periods a worker_deployments row stays live: each refresh writes live_until =
now() + DEPLOYMENT_STALE_AFTER * period, and a row is live while live_until > now()."""

SEEN_SQL = """
insert into ilr.worker_deployments (worker_id, name, version, seen_at, live_until)
select %(worker)s, a.name, a.version, now(), now() + make_interval(secs => %(live)s)
  from unnest(%(names)s::text[], %(versions)s::text[]) as a(name, version)
on conflict (worker_id, name, version) do update set seen_at = excluded.seen_at, live_until = excluded.live_until
"""
"""Upsert every (name, version) this worker serves as seen now: at register and on each refresh."""


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
            conn.execute("delete from ilr.worker_deployments where worker_id = %s", (worker_id,))
    except psycopg.Error as exc:
        log.warning("%s: could not delete its worker_deployments rows (%s)", worker_id, exc)
