"""A worker's heartbeat: renew the leases of the runs it holds every lease_ttl / 3 seconds, and
its worker_deployments rows every deployment_refresh seconds (docs/protocol.md §3)."""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from ilr import _db as db
from ilr._queries.claims import HEARTBEAT_SQL
from ilr._worker.deployments import refresh_deployments

log = logging.getLogger("ilr.worker")


def heartbeat_loop(worker: Any) -> None:
    """The heartbeat thread of ``worker`` (an ``ilr.Worker``), until it stops and holds no run.

    A run whose renewal returns no row is marked fenced: another epoch owns it, or its lease
    lapsed. A lost connection renews nothing this beat and is replaced on the next.
    """
    conn = None
    failing = False  # the last renewal failed on a lost connection: the next success says so
    last_beat: float | None = None  # monotonic time of the last renewal while runs were held
    interval = worker.lease_ttl / 3
    next_beat = time.monotonic() + interval
    next_seen = time.monotonic() + worker.deployment_refresh  # register() wrote the first one
    while not worker.done():
        # Short naps so a stopping worker exits soon after its last run; beats every ttl/3.
        time.sleep(min(0.1, max(0.0, next_beat - time.monotonic())))
        if time.monotonic() >= next_seen:  # low frequency, beside the lease renewals
            next_seen = time.monotonic() + worker.deployment_refresh
            conn = refresh_deployments(conn, worker.dsn, worker.seen_params())
        if time.monotonic() < next_beat:
            continue
        next_beat = time.monotonic() + interval
        runs = worker.held_runs()
        if not runs:
            last_beat = None
            continue
        try:
            if not db.usable(conn):
                db.discard(conn)
                conn = db.connect(worker.dsn, application_name=f"ilr-worker-{worker.worker_id}-heartbeat")
            t0 = time.monotonic()
            rows = conn.execute(
                HEARTBEAT_SQL,
                {
                    "ttl": worker.lease_ttl,
                    "ids": [r.workflow_id for r in runs],
                    "epochs": [r.epoch for r in runs],
                },
            ).fetchall()
        except psycopg.Error as exc:
            if not db.is_connection_fault(exc):
                raise
            # Renewed nothing: each run's local lease runs out on its own, and the fence
            # refuses its writes once its lease lapsed. A fresh connection next beat (a
            # read-only server may be a demoted primary; the next one may reach its successor).
            worker.note_fault()
            failing = True
            log.warning("%s: heartbeat failed (%s)", worker.worker_id, exc)
            if conn is not None:
                conn.close()
            conn = None
            continue
        done = time.monotonic()
        if failing:
            failing = False
            log.info("%s: reconnected: the heartbeat renews leases again", worker.worker_id)
        if last_beat is not None:
            worker.worst_heartbeat_gap = max(worker.worst_heartbeat_gap, done - last_beat)
        last_beat = done
        worker.heartbeats += 1
        live = {(row["id"], row["epoch"]): row for row in rows}
        for r in runs:
            if (r.workflow_id, r.epoch) in live:
                r.renewed(t0, live[(r.workflow_id, r.epoch)]["cancel_requested_at"])
            elif not r.released:
                r.fenced = True  # zero rows: another epoch owns it, or the lease lapsed
    if conn is not None:
        conn.close()
