"""The tick transaction (docs/protocol.md §5.8): a worker starts each due tick's workflow, exactly
once, with no leader.

Why exactly once: a tick's workflow id derives from the schedule and the tick
(``sched:<schedule>:<UTC time>``) and its ``ilr.schedule_ticks`` row is unique on (schedule,
tick); both are written in the transaction that advances the schedule's ``next_tick_at``, under
the schedule row's lock. A second worker's tick query skips a locked row (``for update skip
locked``), and once the first commits the row's next tick is later, so the second finds nothing
due; a worker that dies mid-transaction rolls back all three, and the next worker redoes them.
No tick starts before its time: the due test and every lateness are on the database clock
(``now()`` of the transaction).

Pruning (``Ticker.prune``) keeps exactly once: a tick row is deleted only when it is older than
the schedule's next tick, than its catch-up window and than ``ILR_SCHEDULE_TICK_RETENTION``, and
``ticks_pruned_through`` (moved in the same statement, under the row lock) marks the newest one
deleted. The tick transaction only meets ticks from ``next_tick_at`` on, which never moves back
past now, and ``record`` refuses any tick at or before the mark that has no row, so a pruned tick
is never recorded, nor its workflow started, again (docs/protocol.md §5.8).
"""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta
from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr._conf import settings
from ilr._errors import InterlockError
from ilr._ops.deployments import check_input_shape, resolve_version_on
from ilr._ops.lifecycle import terminate_in
from ilr._ops.slots import concurrency_for, queue_for
from ilr._ops.starts import start_in
from ilr._ops.workflow_ops import cancel_in
from ilr._queries.schedules import (
    DUE_SCHEDULES,
    OPEN_RUNS,
    SCHEDULE_SAVE,
    TICK_CLOSE,
    TICK_EXISTS,
    TICK_OLDEST_BUFFERED,
    TICK_PRUNE,
    TICK_RECORD,
    TICK_SKIP_BUFFERED,
)
from ilr._schedules.spec import Spec, tick_workflow_id
from ilr._statuses import ACTIVE

ACTOR = "$schedule"
"""``by`` of a cancel or terminate an overlap policy requests: ``$schedule:<schedule id>``."""

FAILED = ("failed", "stuck")
"""How a run ends that pauses a schedule with ``pause_on_failure``."""

MISSED_LISTED = 100
"""Missed ticks recorded one by one per transaction; past it, the rest of the gap is one row."""

MAX_TICKS_PER_TX = 1000
"""Ticks one transaction handles per schedule; the rest is due again for the next one."""

PRUNE_EVERY = 10
"""A schedule's tick transaction prunes at about one in this many (chosen by a hash of its tick)."""

PRUNE_BATCH = 100
"""Tick rows one prune deletes at most: ten per tick at one prune in ten, where a tick adds one."""


def tick_in(conn, limit: int = 50) -> int:
    """The worker's tick transaction body: handle up to ``limit`` due schedules (see the module).

    Returns:
        how many schedules it handled.
    """
    cur = conn.cursor(row_factory=dict_row)
    rows = cur.execute(DUE_SCHEDULES, (limit,)).fetchall()
    starts: dict = {}  # (name, version) -> what a start of it needs, resolved once per transaction
    for row in rows:
        Ticker(conn, row, starts).run()
    return len(rows)


class Ticker:
    """One schedule's ticks in one transaction, its row locked by the caller. ``row`` is an
    ``ilr.schedules`` row with ``db_now``, the database clock."""

    def __init__(self, conn, row: dict, starts: dict | None = None):
        self.conn = conn
        self.starts = {} if starts is None else starts
        self.cur = conn.cursor(row_factory=dict_row)
        self.row = row
        self.sid: str = row["id"]
        self.now: datetime = row["db_now"]
        self.spec = Spec.of_row(row)
        self.paused: bool = row["paused"]
        self.note: str | None = row["note"]
        self.running: list[str] = []
        self.buffered: int = row["buffered"]
        self.pruned_through: datetime | None = row["ticks_pruned_through"]

    def run(self) -> None:
        """Close ended runs, start a buffered tick, handle the due ticks, prune old tick rows (at
        about one turn in PRUNE_EVERY, by a hash of the tick), save the row. An
        allow_all schedule that does not pause on failure and holds no buffered tick needs no
        run's state to act: it closes its ended runs at about one tick in ten (chosen by a hash
        of the tick), which keeps its open ticks few at a tenth of the cost."""
        needs_runs = self.row["overlap"] != "allow_all" or self.row["pause_on_failure"] or self.buffered
        tick = self.row["next_tick_at"]
        now_and_then = zlib.crc32(str(tick).encode()) % 10 == 0
        if (needs_runs or now_and_then) and self.row["has_open"] and self.close_ended():
            self.save(self.row["next_tick_at"])
            return
        self.start_buffered()
        t = self.row["next_tick_at"]
        if self.row["next_fire_at"] is not None and self.row["next_fire_at"] <= self.now:
            t = self.due(t)
        if zlib.crc32(f"prune|{tick}".encode()) % PRUNE_EVERY == 0:
            self.prune(t)
        self.save(t)

    def prune(self, t: datetime | None) -> None:
        """Delete up to PRUNE_BATCH of this schedule's tick rows (ended, skipped or missed; never
        an open or buffered one) older than all of: ``ILR_SCHEDULE_TICK_RETENTION`` (None:
        never), the catch-up window, and ``t``, the next tick. The next tick bounds it because a
        backfill may have recorded a tick the ticker has yet to meet (started early): its row
        must be there when the ticker does. The window bounds it so that no tick a catch-up may
        still handle loses its row. TICK_PRUNE moves ``ticks_pruned_through``, which ``record``
        refuses to go back to."""
        retention = settings.SCHEDULE_TICK_RETENTION
        if retention is None:
            return
        horizon = self.now - timedelta(seconds=max(retention, self.row["catchup_window_s"]))
        if t is not None:
            horizon = min(horizon, t)
        row = self.cur.execute(TICK_PRUNE, (self.sid, horizon, PRUNE_BATCH, self.sid)).fetchone()
        if row is not None:
            self.pruned_through = row["ticks_pruned_through"]

    def close_ended(self) -> bool:
        """``refresh_running``, then pause when a run failed and ``pause_on_failure`` is set
        (the note names the run). Returns whether the schedule is paused."""
        failed = self.refresh_running()
        if failed and self.row["pause_on_failure"] and not self.paused:
            self.paused = True
            self.note = f"paused on failure: {failed[0]} ended {failed[1]}"
        return self.paused

    def refresh_running(self) -> tuple[str, str] | None:
        """``running``: the active runs of the ticks this schedule started; close the ended ones.
        Returns (run id, status) of one that failed, if any did."""
        failed = None
        self.running = []
        # A run may end while this transaction runs (its worker commits on its own connection):
        # it is then seen active, and this tick is handled as if it came a moment earlier (skipped,
        # buffered, ...); the next tick transaction sees it ended and closes it. No run is seen
        # ended before it is, so a policy that waits for the end never starts early.
        for r in self.cur.execute(OPEN_RUNS, (self.sid,)).fetchall():
            if r["status"] in ACTIVE:
                self.running.append(r["id"])
                continue
            self.cur.execute(TICK_CLOSE, (r["status"], self.sid, r["scheduled_at"]))
            if r["status"] in FAILED:
                failed = (r["id"], r["status"])
        return failed

    def start_buffered(self) -> None:
        """Start the oldest buffered tick when no run is active (buffer_one, buffer_all,
        cancel_other)."""
        while self.buffered and not self.running:
            oldest = self.cur.execute(TICK_OLDEST_BUFFERED, (self.sid,)).fetchone()
            if oldest is None:
                self.buffered = 0
                return
            self.buffered -= 1
            self.start(oldest["scheduled_at"], oldest["kind"], oldest["overlap"])

    def due(self, t: datetime | None) -> datetime | None:
        """Handle the ticks due by now from ``t`` on; return the next tick not yet due."""
        window = timedelta(seconds=self.row["catchup_window_s"])
        listed = handled = 0
        while t is not None and handled < MAX_TICKS_PER_TX:
            fire = self.spec.fire_at(self.sid, t)
            if fire > self.now:
                break
            handled += 1
            late = self.now - fire
            if late <= window:
                self.act(t, "tick", self.row["overlap"])
            elif listed < MISSED_LISTED:
                listed += 1
                self.record(t, "tick", None, "missed", f"{_s(late)} late, beyond the catch-up window of {_s(window)}")
            else:
                # A long gap: one row for the rest of it, and on to the first tick inside the window.
                nxt = self.spec.next_after(self.now - window - timedelta(microseconds=1))
                until = nxt.isoformat() if nxt else "the schedule's end"
                reason = f"beyond the catch-up window, as is every tick after it until {until}"
                self.record(t, "tick", None, "missed", reason)
                t = nxt
                continue
            t = self.spec.next_after(t)
        return t

    def act(self, t: datetime, kind: str, overlap: str) -> str | None:
        """Apply ``overlap`` to tick ``t``; returns the workflow id it started, if any."""
        if not self.running or overlap == "allow_all":
            return self.start(t, kind, overlap)
        active = ", ".join(self.running)
        if overlap == "skip":
            self.record(t, kind, overlap, "skipped", f"overlap skip: {active} still active")
        elif overlap == "buffer_one" and self.buffered >= 1:
            self.record(t, kind, overlap, "skipped", "overlap buffer_one: a tick is already buffered")
        elif overlap in ("buffer_one", "buffer_all"):
            self.buffer(t, kind, overlap)
        elif overlap == "cancel_other":
            for wf in self.running:
                cancel_in(self.conn, wf, by=f"{ACTOR}:{self.sid}")
            self.cur.execute(TICK_SKIP_BUFFERED, (f"overlap cancel_other: replaced by {t.isoformat()}", self.sid))
            self.buffered = 0
            self.buffer(t, kind, overlap)
        else:  # terminate_other
            for wf in self.running:
                terminate_in(self.conn, wf, f"overlap terminate_other: tick {t.isoformat()}", f"{ACTOR}:{self.sid}")
            self.running = []
            return self.start(t, kind, overlap)
        return None

    def buffer(self, t: datetime, kind: str, overlap: str) -> None:
        """Record tick ``t`` buffered (it starts once no run is active) and count it."""
        if self.record(t, kind, overlap, "buffered", "waiting for the active run to end"):
            self.buffered += 1

    def start(self, t: datetime, kind: str, overlap: str | None) -> str | None:
        """Start tick ``t``'s workflow and record it, or record it missed with the refusal."""
        wf_id = tick_workflow_id(self.sid, t)
        row = self.row
        try:
            version, queue = self._resolved(row["workflow_name"], row["workflow_version"])
            with self.conn.transaction():  # a savepoint: a refused start leaves the rest
                if not self.record(t, kind, overlap, "started", None, wf_id):
                    return None  # already started: exactly once
                check_input_shape(row["workflow_name"], version, row["input"])
                key, limit, policy = concurrency_for(row["workflow_name"], version, row["input"])
                input_json = codec.dumps(row["input"], "input")
                start_in(
                    self.conn, wf_id, row["workflow_name"], version, input_json,
                    key=key, limit=limit, on_conflict=policy, queue=queue,
                )  # fmt: skip
        except InterlockError as exc:
            self.record(t, kind, overlap, "missed", f"the start was refused: {type(exc).__name__}: {exc}")
            return None
        self.running.append(wf_id)
        return wf_id

    def _resolved(self, name: str, version: str | None) -> tuple[str, tuple]:
        """(version, queue) of a start of ``name``, once per tick transaction (``starts``)."""
        if (name, version) not in self.starts:
            resolved = resolve_version_on(self.conn, name, version)
            self.starts[(name, version)] = (resolved, queue_for(name, resolved))
        return self.starts[(name, version)]

    def record(self, t: datetime, kind: str, overlap: str | None, outcome: str, reason: str | None, wf_id=None) -> bool:
        """Record tick ``t`` handled under ``overlap`` (TICK_RECORD); False when its record stands
        as it was, or when ``t`` has no row and is at or before ``ticks_pruned_through`` (it was
        pruned)."""
        if self.pruned_through is not None and t <= self.pruned_through:
            # At or before the mark: a tick whose row is gone was pruned (recorded once already),
            # and is never recorded, nor started, again. Only a transaction that waited on the row
            # lock while the prune committed can meet one (the lock's read returned the new mark).
            # A row still there (a buffered tick, never pruned) goes on as usual.
            if self.cur.execute(TICK_EXISTS, (self.sid, t)).fetchone() is None:
                return False
        started = outcome == "started"
        params: tuple[Any, ...] = (self.sid, t, kind, overlap, outcome, reason, wf_id, started, started)
        return self.cur.execute(TICK_RECORD, params).fetchone() is not None

    def save(self, t: datetime | None) -> None:
        """Write the schedule's row: next tick ``t`` (None: past ``end_at``) and its fire time,
        pause state and note, the buffered count (SCHEDULE_SAVE)."""
        fire = self.spec.fire_at(self.sid, t) if t is not None else None
        self.cur.execute(SCHEDULE_SAVE, (t, fire, self.paused, self.note, self.sid, self.sid))


def _s(delta: timedelta) -> str:
    return f"{delta.total_seconds():.3f} s"
