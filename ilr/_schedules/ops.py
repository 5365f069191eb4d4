"""The operator's writes and reads of schedules (``rt.schedule`` and its siblings; docs/protocol.md
§5.8): transaction bodies on any psycopg connection, so the admin and the tests share their SQL.

Each write locks the schedule's row (waiting: a worker's tick transaction holds it briefly) and
takes its decisions on the database clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from psycopg.rows import dict_row

from ilr import _codec as codec
from ilr._errors import InvalidInput
from ilr._queries.schedules import (
    DB_NOW,
    OPEN_RUNS,
    SCHEDULE_DELETE,
    SCHEDULE_GET,
    SCHEDULE_INSERT,
    SCHEDULE_LIST,
    SCHEDULE_LOCK,
    SCHEDULE_SAVE,
    SCHEDULE_UPDATE,
    TICKS_RECENT,
)
from ilr._schedules.spec import Spec, check_overlap, check_schedule_id, check_spec, check_time, check_window
from ilr._schedules.ticks import Ticker
from ilr._statuses import ACTIVE

MAX_BACKFILL = 1000
"""Ticks one backfill may cover."""

_US = timedelta(microseconds=1)


def schedule_in(
    conn,
    schedule_id: str,
    workflow_name: str,
    input: Any,
    *,
    cron: str | None = None,
    every: float | None = None,
    timezone: str = "UTC",
    jitter: float = 0,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    overlap: str = "skip",
    catchup_window: float = 60,
    pause_on_failure: bool = False,
    version: str | None = None,
    source: str = "api",
) -> dict:
    """Create or update schedule ``schedule_id`` (see ``Runtime.schedule``); ``source`` "code"
    marks one declared in code (``declare_schedule``), which ``manage.py ilr_schedules --prune`` may
    delete once no longer declared. An update that keeps
    the spec keeps the next tick; one that changes it moves the next tick to the spec's first
    after now. Pause state and tick records stay. Returns the schedule (``describe``'s shape
    without the tick lists)."""
    check_schedule_id(schedule_id)
    codec.check_text(workflow_name, "workflow_name")
    if version is not None:
        codec.check_text(version, "version")
    spec = check_spec(cron, every, timezone, jitter, start_at, end_at)
    check_overlap(overlap)
    window = check_window(catchup_window)
    if not isinstance(pause_on_failure, bool):
        raise InvalidInput("pause_on_failure", f"must be True or False, got {pause_on_failure!r}")
    input_json = codec.dumps({} if input is None else input, "input")
    cur = conn.cursor(row_factory=dict_row)
    old = cur.execute(SCHEDULE_LOCK, (schedule_id,)).fetchone()
    now = cur.execute(DB_NOW).fetchone()["now"]
    if old is not None and Spec.of_row(old) == spec:
        tick = old["next_tick_at"]
    else:
        tick = spec.next_after(now)
    fire = spec.fire_at(schedule_id, tick) if tick is not None else None
    body: tuple[Any, ...] = (workflow_name, version, input_json, spec.cron, spec.every, spec.timezone)
    if source not in ("api", "code"):
        raise InvalidInput("source", f"must be 'api' or 'code', got {source!r}")
    body += (spec.jitter, spec.start_at, spec.end_at, overlap, window, pause_on_failure, tick, fire, source)
    if old is None:
        cur.execute(SCHEDULE_INSERT, (schedule_id, *body))
    else:
        cur.execute(SCHEDULE_UPDATE, (*body, schedule_id))
    return cur.execute(SCHEDULE_GET, (schedule_id,)).fetchone()


def _lock(conn, schedule_id: str) -> dict:
    check_schedule_id(schedule_id)
    row = conn.cursor(row_factory=dict_row).execute(SCHEDULE_LOCK, (schedule_id,)).fetchone()
    if row is None:
        raise InvalidInput("schedule_id", f"no schedule {schedule_id!r}")
    return row


def pause_schedule_in(conn, schedule_id: str, note: str | None = None) -> bool:
    """Pause: no tick starts until resumed (ticks meanwhile are neither run nor recorded, and
    buffered ones wait). Returns True when this call paused it.

    Raises:
        InvalidInput: no such schedule (field "schedule_id"), an empty ``note``.
    """
    row = _lock(conn, schedule_id)
    if note is not None:
        codec.check_text(note, "note")
    if row["paused"]:
        return False
    conn.execute(SCHEDULE_SAVE, (row["next_tick_at"], row["next_fire_at"], True, note or "paused", *[schedule_id] * 2))
    return True


def resume_schedule_in(conn, schedule_id: str) -> bool:
    """Resume: the next tick is the spec's first after now (what fell in the pause is not
    caught up; ``backfill_schedule`` runs it). Returns True when this call resumed it.

    Raises:
        InvalidInput: no such schedule (field "schedule_id").
    """
    row = _lock(conn, schedule_id)
    if not row["paused"]:
        return False
    spec = Spec.of_row(row)
    tick = spec.next_after(row["db_now"])
    fire = spec.fire_at(schedule_id, tick) if tick is not None else None
    conn.execute(SCHEDULE_SAVE, (tick, fire, False, None, schedule_id, schedule_id))
    return True


def trigger_schedule_in(conn, schedule_id: str, overlap: str | None = None) -> dict:
    """A tick now (the database clock), under ``overlap`` (default the schedule's); paused or
    not. Returns {"scheduled_at", "workflow_id" (None when not started), "outcome" ("started",
    "buffered", "skipped" or "missed": its start was refused)}.

    Raises:
        InvalidInput: no such schedule (field "schedule_id"), an unknown overlap.
    """
    row = _lock(conn, schedule_id)
    policy = check_overlap(overlap or row["overlap"])
    ticker = Ticker(conn, row)
    ticker.close_ended()  # an explicit tick starts even when this pauses the schedule
    started = ticker.act(row["db_now"], "trigger", policy)
    ticker.save(row["next_tick_at"])
    return _outcome(conn, schedule_id, row["db_now"], started)


def backfill_schedule_in(conn, schedule_id: str, start: datetime, end: datetime, overlap: str | None = None) -> dict:
    """The spec's ticks in [start, end) now, under ``overlap`` (default the schedule's), with no
    catch-up window; a tick already started is not started again (exactly once per tick), one
    missed or skipped may start now. Returns {"ticks": n, "started": [workflow ids]}.

    Raises:
        InvalidInput: no such schedule (field "schedule_id"), a naive or missing start or end,
            end not after start or more than MAX_BACKFILL ticks (field "end"), a tick at or
            before ``ticks_pruned_through`` (field "start": its row was pruned), an unknown
            overlap.
    """
    row = _lock(conn, schedule_id)
    check_time(start, "start", optional=False)
    check_time(end, "end", optional=False)
    if end <= start:
        raise InvalidInput("end", f"must be after start ({start.isoformat()}), got {end.isoformat()}")
    policy = check_overlap(overlap or row["overlap"])
    spec = Spec.of_row(row)
    ticks = [t for t in spec.ticks(start - _US, end, MAX_BACKFILL + 1) if t < end]
    if len(ticks) > MAX_BACKFILL:
        raise InvalidInput("end", f"a backfill covers at most {MAX_BACKFILL} ticks")
    pruned = row["ticks_pruned_through"]  # read under the row lock: no prune moves it meanwhile
    if pruned is not None and ticks and ticks[0] <= pruned:
        raise InvalidInput(
            "start",
            f"the ticks up to {pruned.isoformat()} were pruned (ILR_SCHEDULE_TICK_RETENTION) and are never "
            f"started again: start after it, got {start.isoformat()}",
        )
    ticker = Ticker(conn, row)
    ticker.close_ended()  # an explicit tick starts even when this pauses the schedule
    started = [wf for t in ticks if (wf := ticker.act(t, "backfill", policy))]
    ticker.save(row["next_tick_at"])
    return {"ticks": len(ticks), "started": started}


def delete_schedule_in(conn, schedule_id: str) -> bool:
    """Delete the schedule and its tick records; the runs it started go on. Returns True when it
    existed."""
    check_schedule_id(schedule_id)
    return conn.execute(SCHEDULE_DELETE, (schedule_id,)).fetchone() is not None


def describe_schedule_on(conn, schedule_id: str, n: int = 20) -> dict:
    """The schedule's row, plus "next_ticks" (its next 5 ticks), "running" (the active runs its
    ticks started), "recent" (its last ``n`` started ticks), "missed" (its last ``n`` missed or
    skipped ticks, with "reason") and "buffered" (its buffered ticks, oldest first).

    Raises:
        InvalidInput: no such schedule (field "schedule_id").
    """
    check_schedule_id(schedule_id)
    cur = conn.cursor(row_factory=dict_row)
    row = cur.execute(SCHEDULE_GET, (schedule_id,)).fetchone()
    if row is None:
        raise InvalidInput("schedule_id", f"no schedule {schedule_id!r}")
    spec = Spec.of_row(row)
    t, nxt = row["next_tick_at"], list[datetime]()
    while t is not None and len(nxt) < 5:
        nxt.append(t)
        t = spec.next_after(t)
    row["next_ticks"] = nxt
    row["recent"] = cur.execute(TICKS_RECENT, (schedule_id, ["started"], n)).fetchall()
    row["running"] = [r["id"] for r in cur.execute(OPEN_RUNS, (schedule_id,)).fetchall() if r["status"] in ACTIVE]
    row["missed"] = cur.execute(TICKS_RECENT, (schedule_id, ["missed", "skipped"], n)).fetchall()
    row["buffered"] = cur.execute(TICKS_RECENT, (schedule_id, ["buffered"], 10_000)).fetchall()[::-1]
    return row


def schedules_on(conn) -> list[dict]:
    """Every schedule's row, by id."""
    return conn.cursor(row_factory=dict_row).execute(SCHEDULE_LIST).fetchall()


def _outcome(conn, schedule_id: str, t: datetime, started: str | None) -> dict:
    rec = (
        conn.cursor(row_factory=dict_row)
        .execute(TICKS_RECENT, (schedule_id, ["started", "buffered", "skipped", "missed"], 1))
        .fetchone()
    )
    outcome = rec["outcome"] if rec is not None and rec["scheduled_at"] == t else None
    return {"scheduled_at": t, "workflow_id": started, "outcome": outcome}
