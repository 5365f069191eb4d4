"""Invariants of schedules (docs/protocol.md §5.8, §11), read from ilr.schedule_ticks and the
workflows its ticks started. Times: a tick's ``scheduled_at``; its workflow row's ``created_at``
(the tick transaction's now()); its ``started_at`` (clock_timestamp() at its start, after the
ends of the runs that transaction saw); a run's end is its chain's last row's ``updated_at``."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from ilr._invariants.snapshot import Snapshot, violation
from ilr._schedules.spec import tick_workflow_id

_EXCLUSIVE = ("skip", "buffer_one", "buffer_all", "cancel_other", "terminate_other")
"""The overlap policies under which a tick starts only when no other run of its schedule is active."""


def schedule_tick_once(s: Snapshot) -> list:
    """At most one workflow per schedule and tick: each started tick's workflow is the id its
    (schedule, tick) derives, and no first run named as a live schedule's tick, inserted since the
    schedule was created, lacks its tick row (a second start of one tick would be such a run),
    unless its tick is at or before the schedule's ``ticks_pruned_through`` (its row was pruned,
    and no tick there is recorded again)."""
    out = []
    for t in s.schedule_ticks:
        if t["outcome"] != "started":
            continue
        expected = tick_workflow_id(t["schedule_id"], t["scheduled_at"])
        if t["workflow_id"] != expected:
            out.append(violation(schedule=t["schedule_id"], workflow=t["workflow_id"], expected=expected))
    for w in s.unticked:
        tick = tick_of(w["id"], w["schedule_id"])
        pruned = w["ticks_pruned_through"]
        if tick is None or pruned is None or tick > pruned:
            out.append(violation(workflow=w["id"], rule="no tick row started it"))
    return out


def tick_of(workflow_id: str, schedule_id: str) -> datetime | None:
    """The tick a ``sched:<schedule>:<UTC time>Z`` workflow id names; None when it names none."""
    text = workflow_id[len(f"sched:{schedule_id}:") :]
    if not text.endswith("Z"):
        return None
    try:
        tick = datetime.fromisoformat(text[:-1] + "+00:00")
    except ValueError:
        return None
    return tick if tick_workflow_id(schedule_id, tick) == workflow_id else None


def schedule_tick_not_early(s: Snapshot) -> list:
    """No tick runs before its time on the database clock: a started tick's workflow row was
    inserted (``created_at``) and its start recorded (``started_at``) at or after its tick."""
    out = []
    for t in s.schedule_ticks:
        if t["outcome"] != "started" or t["created_ts"] is None:
            continue
        if t["created_ts"] < t["scheduled_ts"] or (t["started_ts"] or 0) < t["scheduled_ts"]:
            out.append(violation(workflow=t["workflow_id"], scheduled=t["scheduled_ts"], created=t["created_ts"]))
    return out


def schedule_overlap_respected(s: Snapshot) -> list:
    """A tick started under skip, buffer_one, buffer_all, cancel_other or terminate_other began
    when no other run its schedule started was active: every earlier start of the schedule had
    ended (its chain's last run's end) at or before this start."""
    by_schedule: dict[str, list[dict]] = defaultdict(list)
    for t in s.schedule_ticks:
        if t["outcome"] == "started" and t["started_ts"] is not None:
            by_schedule[t["schedule_id"]].append(t)
    out = []
    for sid, runs in by_schedule.items():
        runs.sort(key=lambda r: r["started_ts"])
        for i, t in enumerate(runs):
            if t["overlap"] not in _EXCLUSIVE:
                continue
            active = [r["workflow_id"] for r in runs[:i] if r["ended_ts"] is None or r["ended_ts"] > t["started_ts"]]
            if active:
                out.append(violation(schedule=sid, workflow=t["workflow_id"], overlap=t["overlap"], active=active))
    return out
