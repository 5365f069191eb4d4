"""The admin's writes of schedules (docs/guides/schedules.md): the runtime's transaction body and a
LogEntry in one transaction, as ``approvals.services`` does for workflows and grants. Every write
needs the ``ilr.change_schedule`` permission."""

from __future__ import annotations

from datetime import datetime

from django.contrib.admin.models import ADDITION, CHANGE
from django.core.exceptions import PermissionDenied
from django.db import transaction

from approvals.services import _ilr_conn, _log
from ilr import backfill_schedule_in, pause_schedule_in, resume_schedule_in, schedule_in, trigger_schedule_in
from ilr.models import Schedule

PERMISSION = "ilr.change_schedule"


def _require(user) -> None:
    if not (user is not None and user.is_authenticated and user.is_active and user.has_perm(PERMISSION)):
        raise PermissionDenied(f"you need the {PERMISSION} permission")


def schedule_save(*, user, schedule_id: str, workflow_name: str, input, **options) -> dict:
    """Create or update a schedule (``schedule_in``; ``options`` are its keywords) and log it.

    Raises:
        PermissionDenied: no ilr.change_schedule permission.
        InvalidInput: naming the field; nothing is written.
    """
    _require(user)
    with transaction.atomic():
        existed = Schedule.objects.filter(id=schedule_id).exists()
        row = schedule_in(_ilr_conn(), schedule_id, workflow_name, input, **options)
        what = "Updated" if existed else "Created"
        _log(user, Schedule, schedule_id, schedule_id, CHANGE if existed else ADDITION, f"{what}: {_spec(row)}.")
    return row


def _spec(row: dict) -> str:
    every = f"every {row['every_s']:g} s" if row["every_s"] is not None else f"cron {row['cron']!r}"
    return f"{row['workflow_name']} {every} in {row['timezone']}, overlap {row['overlap']}"


def schedule_pause(*, user, schedule_id: str, note: str) -> bool:
    """Pause (``pause_schedule_in``, the note naming the user); logged when it paused it."""
    _require(user)
    with transaction.atomic():
        done = pause_schedule_in(_ilr_conn(), schedule_id, f"{note} (by {user.get_username()})")
        if done:
            _log(user, Schedule, schedule_id, schedule_id, CHANGE, f"Paused: {note}.")
    return done


def schedule_resume(*, user, schedule_id: str) -> bool:
    """Resume (``resume_schedule_in``); logged when it resumed it."""
    _require(user)
    with transaction.atomic():
        done = resume_schedule_in(_ilr_conn(), schedule_id)
        if done:
            _log(user, Schedule, schedule_id, schedule_id, CHANGE, "Resumed from the next tick.")
    return done


def schedule_trigger(*, user, schedule_id: str) -> dict:
    """A tick now (``trigger_schedule_in``), logged with what it did."""
    _require(user)
    with transaction.atomic():
        out = trigger_schedule_in(_ilr_conn(), schedule_id)
        what = f"Triggered: {out['outcome']} {out['workflow_id'] or ''}".strip()
        _log(user, Schedule, schedule_id, schedule_id, CHANGE, what)
    return out


def schedule_backfill(*, user, schedule_id: str, start: datetime, end: datetime, overlap: str | None) -> dict:
    """The ticks of [start, end) now (``backfill_schedule_in``), logged with what it started."""
    _require(user)
    with transaction.atomic():
        out = backfill_schedule_in(_ilr_conn(), schedule_id, start, end, overlap)
        what = f"Backfilled {start.isoformat()} to {end.isoformat()}: {out['ticks']} ticks"
        _log(user, Schedule, schedule_id, schedule_id, CHANGE, f"{what}, {len(out['started'])} started.")
    return out
