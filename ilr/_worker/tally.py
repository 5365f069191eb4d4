"""What a worker did, counted for its exit line: runs claimed (and how many were takeovers of a
lapsed lease), how each ended, fences and releases (``ilr._worker.worker``)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("ilr.worker")

OUTCOMES = ("completed", "failed", "cancelled", "stuck", "continued", "suspended", "fenced", "abandoned", "errors")
"""How a claimed run ends in this worker, in the exit line's order: an end status its own write
recorded, or continued (as new); suspended (it sleeps, or waits: no end yet); fenced (a write refused,
another claim holds it); abandoned (a database fault stopped it; released later); errors (an
unexpected runtime error, logged with its traceback)."""


class Tally:
    """Counters of one worker process, safe to bump from its run threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = dict.fromkeys(("claimed", "takeovers", "released", *OUTCOMES), 0)

    def add(self, what: str, n: int = 1) -> None:
        """Add ``n`` to counter ``what`` (a key of ``counts``; KeyError for any other)."""
        with self._lock:
            self.counts[what] += n

    def claimed(self, run, worker_id: str) -> None:
        """Count a claim (``run``, an ``ilr._worker.claims.Run``); a takeover of a lapsed lease is one
        INFO line naming the workflow, the new epoch, the worker whose lease lapsed and how long ago."""
        self.add("claimed")
        if run.prev_status != "running":
            return
        self.add("takeovers")
        lapsed = (run.claimed_at - run.prev_lease).total_seconds() if run.claimed_at and run.prev_lease else 0.0
        log.info(
            "%s: took over %s (epoch %s) from %s, whose lease lapsed %.1f s ago (takeover %d since its last step)",
            worker_id,
            run.workflow_id,
            run.epoch,
            run.prev_owner or "a worker",
            lapsed,
            run.takeovers,
        )

    def summary(self) -> str:
        """One clause for the exit line: "claimed 12 runs (1 takeover): 9 completed, 2 suspended, 1
        fenced; released 1", naming only the outcomes that happened."""
        c = dict(self.counts)
        takeovers = f"{c['takeovers']} takeover" + ("" if c["takeovers"] == 1 else "s")
        head = f"claimed {c['claimed']} run{'' if c['claimed'] == 1 else 's'} ({takeovers})"
        ends = ", ".join(f"{c[o]} {o}" for o in OUTCOMES if c[o])
        text = f"{head}: {ends}" if ends else head
        if c["released"]:
            text += f"; released {c['released']} after a database fault"
        return text
