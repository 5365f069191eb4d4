"""Failover: what the runtime does after a standby was promoted (docs/guides/operating.md "Failover").

The hazard. With asynchronous replication a primary that dies takes the tail of its WAL with
it: commits it acknowledged that never reached the standby. A T_dispatch in that tail is gone,
but its send is not: the target applied it (or will, within send_timeout + settle_margin of its
stopwatch). On the promoted standby the effect is 'proposed' or has no row at all, the replay
of its workflow reaches the same ``ctx.effect`` with the same key, and T_dispatch authorizes a
first send: a tier-2 target applies it a second time, a tier-3 one too, and the receipt of that
second send says it happened once. The claims of the tail are lost as well, so the next claim
issued the same epoch a second time, and a worker still holding that epoch from the old primary
could pass the fence on the new one.

The rules, and why they are enough:

1. Timelines. A promotion starts a new WAL timeline (``ilr.current_timeline()``). A worker
   reads it each time it opens its claim connection and records it in ``ilr.timelines`` (the
   first writer's now() is ``seen_at``); the migration recorded the baseline. A claim on the
   new primary is made on a claim connection opened after the promotion (the old primary is
   gone, and ``target_session_attrs=read-write`` admits no standby), so every run claimed
   there carries the switch (``Run.failover``). Normal path: one statement per claim
   connection opened, nothing per claim or per effect.

2. Epochs (``ilr.next_epoch``, in the claim statement): an epoch issued on timeline T is below
   (T - 1) * 2^32 + 2^32, the floor of every later timeline. No epoch of a lost tail is issued
   again, and a worker holding one is fenced out (its fence matches no row).

3. First sends of a lineage older than the switch (``suspect``). Only a workflow that existed
   on the old primary can have dispatched there; it existed before the switch was seen, so its
   lineage's ``created_at`` (itself, its parent, the run it continued from) is older than
   ``seen_at`` (database clocks of the two servers agreeing within CLOCK_MARGIN). For such a run
   every first send (no DISPATCHED on this primary) may repeat a lost one, and is decided as a
   recovery would decide an unknown outcome (``ilr._effects.dispatch.submit``):

   - nothing is looked up or sent before ``seen_at + send_timeout + settle_margin``: the lost
     send started before the old primary died, which was before ``seen_at``, so by then it has
     landed or never will (A2), and the lookup cannot miss it nor the new send overlap it;
   - tier 2 (and tier 1 with a lookup) looks the effect up: found, the effect is COMMITTED
     (COMMITTED_ON_QUERY, via "recovery-query", nothing sent); not found, a first send as usual;
   - tier 1 without a lookup sends under its idempotency key, which the target dedupes (A4); a
     refusal before the send (cancel, lease, premise) would claim nothing happened, which the
     lost send may contradict, so it is AMBIGUOUS instead;
   - tier 3 (or tier 1 past a finite dedup window with no lookup: the lost dispatch may be older
     than the window) is AMBIGUOUS: nothing can be learned, and a blind send could apply twice.

   The receipt then holds only what this primary knows: a COMMITTED via recovery-query says it
   happened once and sent nothing; an AMBIGUOUS says "unknown".

Not covered: a workflow whose own row was lost with the tail and that a client starts again
after the switch (its lineage is new); an old primary that keeps taking writes after the
promotion (split brain: fence it, e.g. kill it, before promoting).
"""

from __future__ import annotations

import datetime as dt
import math

from ilr._queries.deployments import TIMELINE_SEEN_SQL

CLOCK_MARGIN = dt.timedelta(seconds=1)
"""How far the old primary's clock may run ahead of the new one's: a lineage created up to this
long after the switch was seen is still treated as older than it."""


def seen(conn) -> dict | None:
    """Record the current timeline of ``conn``'s server and return the last switch.

    Returns:
        {"timeline": int, "at": datetime (database clock, when the runtime first saw it)} when
        the current timeline is newer than the baseline; None on the baseline timeline.

    Raises:
        RuntimeError: the timeline's row is missing even after its insert (never expected).
        psycopg.Error: the statement failed (on a standby, ilr.current_timeline() raises).
    """
    row = conn.execute(TIMELINE_SEEN_SQL).fetchone()
    if row["seen_at"] is None:
        # Lost the insert race: workers open claim connections on the new primary together, and
        # a loser's ``on conflict do nothing`` waited for the winner's commit, but its statement
        # snapshot predates that commit, so the read in the same statement misses the row. A new
        # statement (autocommit, read committed: a new snapshot) holds it.
        row = conn.execute(TIMELINE_SEEN_SQL).fetchone()
        if row["seen_at"] is None:
            raise RuntimeError(f"timeline {row['timeline']} has no ilr.timelines row after its insert")
    if row["baseline"] is None or row["baseline"] >= row["timeline"]:
        return None
    return {"timeline": row["timeline"], "at": row["seen_at"]}


def suspect(run) -> dict | None:
    """The switch a first send of ``run`` must be decided against (rule 3), or None.

    A run claimed after a timeline switch whose lineage was created before it (with
    CLOCK_MARGIN) may have dispatched on the lost tail. Runs without the attributes (an orphan
    recovery's synthetic claim) are never suspect: orphans are dispatched effects, never first
    sends.
    """
    switch = getattr(run, "failover", None)
    born = getattr(run, "born_at", None)
    if not switch or born is None or born >= switch["at"] + CLOCK_MARGIN:
        return None
    return switch


def decision(tier: int, queryable: bool, dedup_window: float) -> str:
    """How a suspect first send is decided (rule 3): "query" (look it up first), "send"
    (tier 1 under its idempotency key, refusals AMBIGUOUS) or "ambiguous" (no send)."""
    if tier == 1 and math.isinf(dedup_window):
        return "query" if queryable else "send"
    if tier == 2 or (tier == 1 and queryable):
        return "query"
    return "ambiguous"
