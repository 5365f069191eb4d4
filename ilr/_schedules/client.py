"""``Runtime``'s schedule calls (docs/protocol.md §5.8; the guide: docs/guides/schedules.md), a
mixin over its ``_tx`` and connection. The bodies are in ``ilr._schedules.ops``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ilr._schedules.ops import (
    backfill_schedule_in,
    delete_schedule_in,
    describe_schedule_on,
    pause_schedule_in,
    resume_schedule_in,
    schedule_in,
    schedules_on,
    trigger_schedule_in,
)


class ScheduleCalls:
    """Schedules: a workflow started per tick of a cron or interval spec, exactly once per tick
    across workers (any worker ticks them, within its poll interval)."""

    _tx: Any
    _lock: Any
    connection: Any

    def schedule(
        self,
        schedule_id: str,
        workflow_name: str,
        input: Any = None,
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
    ) -> dict:
        """Create or update schedule ``schedule_id`` (idempotent on the id): each tick starts
        ``workflow_name`` with ``input`` as workflow ``sched:<schedule_id>:<tick, UTC ISO>Z``,
        whose ``ctx.scheduled_time`` is the tick.

        Args:
            schedule_id: 1 to 150 characters, without '/', '#' or ':'.
            input: plain JSON, the same for every tick. Default {}.
            cron: a 5-field cron expression read in ``timezone`` (croniter); or
            every: an interval in seconds, ticks at ``start_at`` (else the Unix epoch) + k * every.
            timezone: an IANA zone; a daylight-saving gap fires once at the shifted time, a
                repeated hour once (at its first occurrence) unless the hour field is "*".
            jitter: seconds; each tick fires up to this much later (fixed per tick). Default 0.
            start_at, end_at: aware datetimes bounding the ticks. Default unbounded.
            overlap: what a tick does while a run this schedule started is active: "skip"
                (default), "buffer_one", "buffer_all", "cancel_other" (cancel it, start after it
                ended), "terminate_other" (terminate it, start now), "allow_all".
            catchup_window: seconds; a tick found later than this (workers down or paused) is
                recorded missed, not run. Default 60.
            pause_on_failure: pause when a run it started fails (or is stuck), noticed at the
                next tick. Default False.
            version: default the newest unretired version at each tick.

        Returns:
            the schedule's row (``describe_schedule`` without its tick lists).

        Raises:
            InvalidInput: naming the field and the rule (a bad cron or one no date matches, both
                or neither of cron and every, an unknown zone or overlap, every, jitter or
                catchup_window out of range (every 0.001 s to 100 years, the others 0 to 100
                years), end_at not after start_at, a naive datetime); nothing is written.
        """
        kw = {"cron": cron, "every": every, "timezone": timezone, "jitter": jitter, "start_at": start_at}
        kw |= {"end_at": end_at, "overlap": overlap, "catchup_window": catchup_window}
        kw |= {"pause_on_failure": pause_on_failure, "version": version}
        return self._tx(schedule_in, schedule_id, workflow_name, input, **kw)

    def pause_schedule(self, schedule_id: str, note: str | None = None) -> bool:
        """Pause (see ``pause_schedule_in``); True when this call paused it."""
        return self._tx(pause_schedule_in, schedule_id, note)

    def resume_schedule(self, schedule_id: str) -> bool:
        """Resume from the next tick after now (see ``resume_schedule_in``); True when this call
        resumed it."""
        return self._tx(resume_schedule_in, schedule_id)

    def trigger_schedule(self, schedule_id: str, overlap: str | None = None) -> dict:
        """A tick now (see ``trigger_schedule_in``): {"scheduled_at", "workflow_id", "outcome"}."""
        return self._tx(trigger_schedule_in, schedule_id, overlap)

    def backfill_schedule(self, schedule_id: str, start: datetime, end: datetime, overlap: str | None = None) -> dict:
        """Run the ticks of [start, end) now (see ``backfill_schedule_in``): {"ticks", "started"}."""
        return self._tx(backfill_schedule_in, schedule_id, start, end, overlap)

    def delete_schedule(self, schedule_id: str) -> bool:
        """Delete it and its tick records; its runs go on. True when it existed."""
        return self._tx(delete_schedule_in, schedule_id)

    def describe_schedule(self, schedule_id: str) -> dict:
        """The schedule with its next ticks, active runs, recent starts, missed and skipped ticks
        with reasons, and buffered ticks (see ``describe_schedule_on``)."""
        return self._tx(describe_schedule_on, schedule_id)

    def schedules(self) -> list[dict]:
        """Every schedule's row, by id."""
        return self._tx(schedules_on)
