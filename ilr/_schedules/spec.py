"""A schedule's spec: its checks and its ticks (docs/protocol.md §5.8). Pure: no database.

A tick is a nominal time (UTC) the spec names; it fires at that time plus its jitter. ``every``
ticks are ``anchor + k * every`` (anchor ``start_at``, else the Unix epoch), so every worker and
every update compute the same ticks. ``cron`` ticks are croniter's, in ``timezone``:

- a local time that does not exist (the spring-forward gap, Europe/Berlin 2026-03-29 02:00 to
  03:00) fires once, at the shifted time: "30 2 * * *" fires at 03:00 CEST that day (croniter's
  rule);
- a local time that happens twice (the fall-back hour, 2026-10-25 02:00 to 03:00) fires once,
  at its first occurrence, unless the hour field is "*": "30 2 * * *" fires at 02:30 CEST only,
  while "0 * * * *" fires every real hour, both 02:00s included (Vixie cron's rule; croniter
  alone would fire "30 2 * * *" twice).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, croniter

from ilr import _codec as codec
from ilr._errors import InvalidInput

OVERLAPS = ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other", "allow_all")
"""Temporal's overlap policies: what a tick does while a run the schedule started is active."""

MAX_SCHEDULE_ID = 150
"""Characters of a schedule id: its ticks' workflow ids (``sched:<id>:<time>``) stay within 200."""

MAX_EVERY = 100 * 365 * 86400
"""Seconds between two ``every`` ticks, at the most (100 years): a tick past it would overflow a
datetime."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Spec:
    """When a schedule ticks. Times are aware datetimes; seconds are floats."""

    cron: str | None
    every: float | None
    timezone: str
    jitter: float
    start_at: datetime | None
    end_at: datetime | None

    @classmethod
    def of_row(cls, row: dict) -> Spec:
        """The spec of an ``ilr.schedules`` row."""
        return cls(row["cron"], row["every_s"], row["timezone"], row["jitter_s"], row["start_at"], row["end_at"])

    def next_after(self, t: datetime) -> datetime | None:
        """The first tick strictly after ``t``, within [start_at, end_at]; None when none is."""
        if self.start_at is not None and t < self.start_at:
            t = self.start_at - timedelta(microseconds=1)
        if self.every is not None:
            anchor = self.start_at or EPOCH
            us = round(self.every * 1e6)
            k = (to_us(t) - to_us(anchor)) // us + 1
            tick = anchor + timedelta(microseconds=k * us)
        else:
            tick = self._cron_after(t)
        if self.end_at is not None and tick > self.end_at:
            return None
        return tick

    def _cron_after(self, t: datetime) -> datetime:
        assert self.cron is not None
        zone = ZoneInfo(self.timezone)
        it = croniter(self.cron, t.astimezone(zone))
        while True:
            tick = it.get_next(datetime).astimezone(UTC)
            if tick <= t:
                continue
            if not self._every_hour() and _second_occurrence(tick, zone):
                continue  # the second 02:30 of a fall-back night: it fired at the first
            return tick

    def _every_hour(self) -> bool:
        assert self.cron is not None
        fields = self.cron.split()
        return len(fields) >= 2 and fields[1] == "*"

    def ticks(self, after: datetime, until: datetime, limit: int) -> list[datetime]:
        """Up to ``limit`` ticks in (after, until], in order."""
        out: list[datetime] = []
        t = self.next_after(after)
        while t is not None and t <= until and len(out) < limit:
            out.append(t)
            t = self.next_after(t)
        return out

    def fire_at(self, schedule_id: str, tick: datetime) -> datetime:
        """When ``tick`` fires: plus its jitter, a fraction of ``jitter`` fixed by a hash of the
        schedule id and the tick (every worker computes the same one)."""
        if not self.jitter:
            return tick
        digest = hashlib.sha256(f"{schedule_id}|{tick.isoformat()}".encode()).digest()
        frac = int.from_bytes(digest[:8], "big") / 2**64
        return tick + timedelta(seconds=self.jitter * frac)


def _second_occurrence(tick: datetime, zone: ZoneInfo) -> bool:
    """Whether ``tick``'s local wall time happened before, an hour earlier (a fall-back hour)."""
    wall = tick.astimezone(zone).replace(tzinfo=None)
    return wall.replace(tzinfo=zone, fold=0).astimezone(UTC) != tick


def to_us(t: datetime) -> int:
    """Microseconds since the Unix epoch."""
    delta = t - EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def tick_workflow_id(schedule_id: str, tick: datetime) -> str:
    """The workflow id of ``schedule_id``'s tick at ``tick``: ``sched:<id>:<UTC time>``, e.g.
    ``sched:nightly:2026-12-05T02:30:00Z`` (microseconds shown when not zero). Unique per
    (schedule, tick): the insert that finds it taken starts nothing."""
    utc = tick.astimezone(UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{utc.microsecond:06d}" if utc.microsecond else "")
    return f"sched:{schedule_id}:{text}Z"


def check_schedule_id(schedule_id: Any) -> str:
    """A schedule id: a workflow id of at most 150 characters without '/', '#' or ':'."""
    codec.check_new_workflow_id(schedule_id, "schedule_id")
    if len(schedule_id) > MAX_SCHEDULE_ID or ":" in schedule_id:
        raise InvalidInput(
            "schedule_id", f"must be at most {MAX_SCHEDULE_ID} characters without ':', got {schedule_id!r}"
        )
    return schedule_id


def check_overlap(overlap: Any, field: str = "overlap") -> str:
    """One of OVERLAPS (InvalidInput naming ``field``)."""
    if overlap not in OVERLAPS:
        raise InvalidInput(field, f"must be one of {', '.join(OVERLAPS)}, got {overlap!r}")
    return overlap


def check_time(value: Any, field: str, optional: bool = True) -> datetime | None:
    """An aware datetime, or None when ``optional`` (InvalidInput naming ``field``)."""
    if value is None and optional:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        alt = " or None" if optional else ""
        raise InvalidInput(field, f"must be an aware datetime (with a time zone){alt}, got {value!r}")
    return value


def check_spec(cron, every, timezone, jitter, start_at, end_at) -> Spec:
    """The spec, checked.

    Raises:
        InvalidInput: naming the field: neither or both of cron and every ("cron"), a cron
            expression croniter refuses or one no date matches ("cron"), every not seconds in
            [0.001, MAX_EVERY] ("every"), an unknown
            zone ("timezone"), jitter not seconds in [0, MAX_EVERY] ("jitter"), a naive start_at or end_at,
            or an end_at not after start_at ("end_at").
    """
    if (cron is None) == (every is None):
        raise InvalidInput("cron", "give exactly one of cron and every")
    if cron is not None:
        if not isinstance(cron, str) or len(cron.split()) != 5 or not croniter.is_valid(cron):
            raise InvalidInput(
                "cron", f"must be a 5-field cron expression (minute hour day month weekday), got {cron!r}"
            )
        try:
            croniter(cron, datetime.now(UTC)).get_next(datetime)
        except CroniterBadDateError:
            raise InvalidInput("cron", f"never fires (no date matches it), got {cron!r}") from None
    elif not codec.is_seconds(every, positive=True) or not 0.001 <= every <= MAX_EVERY:
        raise InvalidInput("every", f"must be seconds, from 0.001 to {MAX_EVERY} (100 years), got {every!r}")
    if not isinstance(timezone, str) or not timezone:
        raise InvalidInput("timezone", f"must be an IANA zone name such as 'Europe/Berlin', got {timezone!r}")
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput("timezone", f"unknown IANA zone {timezone!r}") from None
    if not codec.is_seconds(jitter) or jitter > MAX_EVERY:
        raise InvalidInput("jitter", f"must be seconds from 0 to {MAX_EVERY}, got {jitter!r}")
    start_at = check_time(start_at, "start_at")
    end_at = check_time(end_at, "end_at")
    if start_at is not None and end_at is not None and end_at <= start_at:
        raise InvalidInput("end_at", f"must be after start_at ({start_at.isoformat()}), got {end_at.isoformat()}")
    return Spec(cron, float(every) if every is not None else None, timezone, float(jitter), start_at, end_at)


def check_window(catchup_window: Any) -> float:
    """The catch-up window: seconds in [0, MAX_EVERY] (InvalidInput "catchup_window")."""
    if not codec.is_seconds(catchup_window) or math.isinf(catchup_window) or catchup_window > MAX_EVERY:
        raise InvalidInput("catchup_window", f"must be seconds from 0 to {MAX_EVERY}, got {catchup_window!r}")
    return float(catchup_window)
