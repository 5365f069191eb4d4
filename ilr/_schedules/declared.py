"""Schedules declared in code beside their workflow (DBOS's ``apply_schedules``), applied by
``manage.py ilr_schedules``: each declared schedule is created or updated with ``source`` "code";
with ``prune``, a code schedule no longer declared is deleted (one made through ``rt.schedule``
or the admin never is)."""

from __future__ import annotations

from typing import Any

from psycopg.rows import tuple_row

from ilr._errors import InvalidInput
from ilr._queries.schedules import CODE_SCHEDULES
from ilr._schedules.ops import delete_schedule_in, schedule_in
from ilr._schedules.spec import check_overlap, check_schedule_id, check_spec, check_window

OPTIONS = (
    "cron", "every", "timezone", "jitter", "start_at", "end_at", "overlap", "catchup_window", "pause_on_failure",
    "version",
)  # fmt: skip
"""``rt.schedule``'s keywords: the options a declaration may give."""

_DECLARED: dict[str, tuple[str, Any, dict]] = {}


def declare_schedule(schedule_id: str, workflow_name: str, input: Any = None, **options: Any) -> None:
    """Declare schedule ``schedule_id`` in code (``options``: ``rt.schedule``'s keywords); it is
    created or updated by ``manage.py ilr_schedules``. Declaring an id twice keeps the last.

    Raises:
        InvalidInput: a bad id, an unknown option (named), a bad spec, overlap or window, at
            declaration (at import).
    """
    check_schedule_id(schedule_id)
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise InvalidInput(unknown[0], f"is not an option of a schedule (options: {', '.join(OPTIONS)})")
    spec = {k: options.get(k) for k in ("cron", "every", "start_at", "end_at")}
    check_spec(timezone=options.get("timezone", "UTC"), jitter=options.get("jitter", 0), **spec)
    check_overlap(options.get("overlap", "skip"))
    check_window(options.get("catchup_window", 60))
    _DECLARED[schedule_id] = (workflow_name, input, dict(options))


def declared() -> dict[str, tuple[str, Any, dict]]:
    """The declared schedules by id: (workflow name, input, options)."""
    return dict(_DECLARED)


def sync_in(conn, prune: bool = False) -> dict:
    """Create or update every declared schedule (source "code"); with ``prune``, delete the code
    schedules no longer declared. Returns {"saved": [ids], "pruned": [ids]}."""
    for sid, (name, input, options) in sorted(_DECLARED.items()):
        schedule_in(conn, sid, name, input, source="code", **options)
    pruned = []
    if prune:
        for (sid,) in conn.cursor(row_factory=tuple_row).execute(CODE_SCHEDULES).fetchall():
            if sid not in _DECLARED and delete_schedule_in(conn, sid):
                pruned.append(sid)
    return {"saved": sorted(_DECLARED), "pruned": pruned}
