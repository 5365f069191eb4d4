"""The claim loop's backoff after a failed statement, and its log of a database outage."""

from __future__ import annotations

import logging
import time

import psycopg

from ilr import _db as db

log = logging.getLogger("ilr.worker")

BACKOFF_MIN = 0.1
BACKOFF_MAX = 5.0
"""Seconds the claim loop waits after a failed statement: BACKOFF_MIN after the first, doubling
per failure up to BACKOFF_MAX; the next success ends it (``ClaimBackoff.failed``)."""


class ClaimBackoff:
    """How long the claim loop waits, and whether an outage is under way.

    Args:
        worker_id: the worker's id, for the log lines.
    """

    def __init__(self, worker_id: str):
        self.worker_id = worker_id
        self.wait = 0.0  # seconds the claim loop waits after a failed statement; 0: none failed
        self.outage_since: float | None = None  # monotonic time the claim loop's outage began

    def failed(self, what: str, exc: psycopg.Error) -> bool:
        """A statement of the claim loop (``what``) failed: back off (BACKOFF_MIN doubling to
        BACKOFF_MAX). A connection fault is logged once per outage, when it begins: a worker
        polling every 0.1 s would otherwise log ten lines a second for as long as the database
        is away. Any other database error (a revoked privilege, a missing table) is logged with
        its traceback each time, and the loop goes on: it may be mended while the worker runs,
        and a worker never dies of a claim.

        Returns:
            True when ``exc`` is a lost connection (a database fault), else False.
        """
        self.wait = min(BACKOFF_MAX, self.wait * 2) if self.wait else BACKOFF_MIN
        if not db.is_connection_fault(exc):
            log.exception(
                "%s: %s failed with a database error that is not a lost connection (%s); retrying in %g s",
                self.worker_id,
                what,
                exc,
                self.wait,
            )
            return False
        if self.outage_since is not None:
            log.debug("%s: %s failed (%s); retrying in %g s", self.worker_id, what, exc, self.wait)
            return True
        self.outage_since = time.monotonic()
        log.warning(
            "%s: %s failed (%s); retrying, backing off up to %g s (logged once until the database is reachable again)",
            self.worker_id,
            what,
            exc,
            BACKOFF_MAX,
        )
        return True

    def ok(self) -> None:
        """A statement of the claim loop succeeded: end the backoff, and an outage with one line."""
        self.wait = 0.0
        if self.outage_since is not None:
            # A warning, as the line that began the outage: whoever saw that one sees its end.
            log.warning(
                "%s: database reachable again after %.1f s", self.worker_id, time.monotonic() - self.outage_since
            )
            self.outage_since = None
