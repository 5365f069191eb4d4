"""The operations figures: one cheap read of the runtime's state for the gauges
(``ilr._telemetry.gauges``) and the admin's operations page.

What counts as what (docs/guides/operations-page.md):

- due work: what a worker would claim now (pending or sleeping and available, or running with a
  lapsed lease), per (name, version), with the oldest one's age: the queue lag;
- an unserved version: a (name, version) with due work and no live worker registered for it
  (``rt.unserved()``);
- a stuck workflow: one in status 'stuck' (the crash-loop guard, a non-determinism or a swallowed
  Suspend stopped it: a person resumes or terminates it), or one still 'running' whose lease
  lapsed more than ``stuck_after`` seconds ago with no worker taking it over (its workers are
  gone, or none serves its version);
- an ambiguous effect: state 'ambiguous' (its outcome cannot be learned) and not yet
  reconciled by a person;
- worker slots in use: the runs each live worker holds under a live lease.

Cost: every statement follows a partial index or reads a small set (running rows, live slots,
live workers) except two that scan their table: the count of status 'stuck' (no index has that
status) and the ambiguous effects (no index has that state). ``results/figures_cost.md`` has the
measurements and the DDL of the two missing indexes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from psycopg.rows import dict_row

from ilr._codec import is_seconds
from ilr._conf import settings
from ilr._errors import InvalidInput
from ilr._queries.figures import (
    FIGURES_AMBIGUOUS_SQL,
    FIGURES_COUNTS_SQL,
    FIGURES_DUE_SQL,
    FIGURES_KEYS_SQL,
    FIGURES_OLDEST_APPROVALS_SQL,
    FIGURES_QUEUES_SQL,
    FIGURES_STUCK_SQL,
    FIGURES_UNSERVED_SQL,
    FIGURES_WORKERS_SQL,
)
from ilr._queues import rules

STUCK_AFTER = 300.0
"""Seconds a running workflow's lease may have lapsed, untaken, before it counts as stuck.
Default 300 (a takeover comes within one poll of the lapse while a worker serves the version)."""

SCHEDULE_GRACE = 30.0
"""Seconds past its fire time after which a schedule counts as overdue (no worker ticks it).
Default 30 (a ticking worker fires it within one poll)."""

ITEMS = 10
"""How many of the oldest items each list holds. Default 10."""


@dataclass(frozen=True)
class Figures:
    """The state figures at ``read_at`` (the database's now()). Ages are seconds.

    Attributes:
        read_at: database time of the read.
        approvals_pending: pending approval requests.
        approval_oldest_age_s: the oldest pending request's age; None with none pending.
        effects_ambiguous: ambiguous effects awaiting reconciliation.
        workflows_stuck: status 'stuck' plus running with a lease lapsed over ``stuck_after``.
        runs_held: runs held under a live lease (worker slots in use, all workers).
        workers_live: workers with a live worker_deployments row.
        schedules_overdue: unpaused schedules more than SCHEDULE_GRACE past their fire time.
        schedule_lag_s: how far past its fire time the most overdue schedule is; 0 with none.
        stuck_after_s: the threshold this read counted lapsed leases as stuck with.
        due: [{"name", "version", "due", "oldest_age_s"}] per pair with due work.
        unserved: [{"name", "version", "due", "last_seen"}] per pair no live worker serves.
        workers: [{"worker_id", "live_until", "runs"}] per live worker (or worker holding runs).
        keys: {"holding", "waiting", "keys_with_waiters", "oldest_waiting_age_s"} over
            concurrency and ctx.lock keys.
        queues: [{"queue", "holding", "waiting", "put_off", "oldest_waiting_age_s"}] per
            ILR_QUEUES queue.
        oldest_approvals, ambiguous_effects, stuck: the oldest ITEMS of each (rows as read).
    """

    read_at: datetime
    approvals_pending: int
    approval_oldest_age_s: float | None
    effects_ambiguous: int
    workflows_stuck: int
    runs_held: int
    workers_live: int
    schedules_overdue: int
    schedule_lag_s: float
    stuck_after_s: float
    due: list[dict] = field(default_factory=list)
    unserved: list[dict] = field(default_factory=list)
    workers: list[dict] = field(default_factory=list)
    keys: dict = field(default_factory=dict)
    queues: list[dict] = field(default_factory=list)
    oldest_approvals: list[dict] = field(default_factory=list)
    ambiguous_effects: list[dict] = field(default_factory=list)
    stuck: list[dict] = field(default_factory=list)

    @property
    def due_total(self) -> int:
        """Due work over every (name, version)."""
        return sum(d["due"] for d in self.due)

    @property
    def due_oldest_age_s(self) -> float:
        """The oldest due workflow's age over every pair; 0 with none due."""
        return max((d["oldest_age_s"] for d in self.due), default=0.0)


def figures_on(
    conn: Any,
    *,
    stuck_after: float = STUCK_AFTER,
    schedule_grace: float = SCHEDULE_GRACE,
    items: int = ITEMS,
    queues: dict | None = None,
) -> Figures:
    """Read the figures on ``conn`` (a psycopg connection; the admin passes Django's), in one
    transaction (a savepoint inside one already open).

    Args:
        stuck_after: seconds (> 0) a lapsed lease may go untaken before its workflow counts as stuck.
        schedule_grace: seconds (>= 0) past its fire time before a schedule counts as overdue.
        items: how many of the oldest items each list holds (1 to 1000).
        queues: the ILR_QUEUES setting to report on; default ``ilr._conf.settings.QUEUES``.

    Returns:
        Figures.

    Raises:
        InvalidInput: stuck_after, schedule_grace or items out of range (naming it).
        psycopg.Error: the database failed.
    """
    if not is_seconds(stuck_after, positive=True):
        raise InvalidInput("stuck_after", "a positive number of seconds is required")
    if not is_seconds(schedule_grace):
        raise InvalidInput("schedule_grace", "a number of seconds, 0 or more, is required")
    if isinstance(items, bool) or not isinstance(items, int) or not 1 <= items <= 1000:
        raise InvalidInput("items", "an integer from 1 to 1000 is required")
    queue_keys = {rule.key: name for name, rule in rules(settings.QUEUES if queues is None else queues).items()}
    params = {"stuck_after": float(stuck_after), "schedule_grace": float(schedule_grace), "items": items}
    cur = conn.cursor(row_factory=dict_row)
    with conn.transaction():
        counts = cur.execute(FIGURES_COUNTS_SQL, params).fetchone()
        due = cur.execute(FIGURES_DUE_SQL).fetchall()
        unserved = cur.execute(FIGURES_UNSERVED_SQL).fetchall()
        workers = cur.execute(FIGURES_WORKERS_SQL).fetchall()
        keys = cur.execute(FIGURES_KEYS_SQL).fetchone()
        by_key = {r["key"]: r for r in cur.execute(FIGURES_QUEUES_SQL, {"keys": list(queue_keys)}).fetchall()}
        approvals = cur.execute(FIGURES_OLDEST_APPROVALS_SQL, params).fetchall()
        ambiguous = cur.execute(FIGURES_AMBIGUOUS_SQL, params).fetchall()
        stuck = cur.execute(FIGURES_STUCK_SQL, params).fetchall()
    queue_rows = []
    for key, name in sorted(queue_keys.items(), key=lambda kv: kv[1]):
        row = by_key.get(key, {})
        queue_rows.append(
            {
                "queue": name,
                "holding": row.get("holding", 0),
                "waiting": row.get("waiting", 0),
                "put_off": row.get("put_off", 0),
                "oldest_waiting_age_s": row.get("oldest_waiting_age_s"),
            }
        )
    return Figures(
        read_at=counts["read_at"],
        approvals_pending=counts["approvals_pending"],
        approval_oldest_age_s=counts["approval_oldest_age_s"],
        effects_ambiguous=counts["effects_ambiguous"],
        workflows_stuck=counts["workflows_stuck_status"] + counts["workflows_lease_abandoned"],
        runs_held=counts["runs_held"],
        workers_live=counts["workers_live"],
        schedules_overdue=counts["schedules_overdue"],
        schedule_lag_s=counts["schedule_lag_s"],
        stuck_after_s=float(stuck_after),
        due=due,
        unserved=unserved,
        workers=workers,
        keys=keys,
        queues=queue_rows,
        oldest_approvals=approvals,
        ambiguous_effects=ambiguous,
        stuck=stuck[: items * 2],
    )
