"""Reads of the operations figures (``ilr._telemetry.figures``): counts and the few oldest items
that need a person, for the gauges and the admin's operations page. Read-only; each one follows a
partial index or reads a small set (running rows, live slots, live workers), except the two
named in ``ilr._telemetry.figures`` (stuck workflows, ambiguous effects), which scan their table.
"""

from __future__ import annotations

from ilr._queries.deployments import UNSERVED_SQL

FIGURES_COUNTS_SQL = """
select now() as read_at,
       (select count(*) from ilr.approval_requests where status = 'pending') as approvals_pending,
       (select extract(epoch from now() - min(requested_at))::float8
          from ilr.approval_requests where status = 'pending') as approval_oldest_age_s,
       (select count(*) from ilr.effects where state = 'ambiguous' and reconciled is null) as effects_ambiguous,
       (select count(*) from ilr.workflows where status = 'stuck') as workflows_stuck_status,
       (select count(*) from ilr.workflows
         where status = 'running' and lease_expires_at <= now() - make_interval(secs => %(stuck_after)s))
         as workflows_lease_abandoned,
       (select count(*) from ilr.workflows where status = 'running' and lease_expires_at > now()) as runs_held,
       (select count(distinct worker_id) from ilr.worker_deployments where live_until > now()) as workers_live,
       (select count(*) from ilr.schedules
         where not paused and next_fire_at <= now() - make_interval(secs => %(schedule_grace)s)) as schedules_overdue,
       (select coalesce(extract(epoch from now() - min(next_fire_at))::float8, 0) from ilr.schedules
         where not paused and next_fire_at <= now()) as schedule_lag_s
"""
"""The scalar figures, one row: database time; pending approval requests and the oldest one's age
(s, null with none; approval_requests_pending); ambiguous effects no person has reconciled;
workflows stuck (status 'stuck') and running with a lease lapsed longer than ``stuck_after`` s
(wf_running); runs held under a live lease; live workers (worker_deployments); schedules whose
next fire time is more than ``schedule_grace`` s past, and the oldest due fire time's lag (s, 0
with none; schedules_due)."""

FIGURES_DUE_SQL = """
select w.name, w.version, count(*) as due, extract(epoch from now() - min(w.since))::float8 as oldest_age_s
  from (select name, version, available_at as since from ilr.workflows
         where status in ('pending','sleeping') and available_at <= now()
        union all
        select name, version, lease_expires_at from ilr.workflows
         where status = 'running' and lease_expires_at <= now()) w
 group by w.name, w.version
 order by w.name, w.version
"""
"""Due work (``ilr._queries.deployments.DUE_SQL``) per (name, version): how many a worker would
claim now, and how long the oldest has been due (s): the queue lag. wf_due and wf_running."""

FIGURES_UNSERVED_SQL = UNSERVED_SQL
"""The (name, version) pairs with due work and no live worker (``rt.unserved()``'s statement)."""

FIGURES_WORKERS_SQL = """
select coalesce(l.worker_id, r.owner) as worker_id, l.live_until, coalesce(r.runs, 0) as runs
  from (select worker_id, max(live_until) as live_until from ilr.worker_deployments
         where live_until > now() group by worker_id) l
  full join (select owner, count(*) as runs from ilr.workflows
              where status = 'running' and lease_expires_at > now() group by owner) r
    on r.owner = l.worker_id
 order by 1
"""
"""Live workers and the runs each holds under a live lease (its worker slots in use); a worker
holding runs but no live worker_deployments row is listed too (live_until null)."""

FIGURES_KEYS_SQL = """
select count(*) filter (where slot_no is not null) as holding,
       count(*) filter (where slot_no is null) as waiting,
       count(distinct key) filter (where slot_no is null) as keys_with_waiters,
       extract(epoch from now() - min(queued_at) filter (where slot_no is null))::float8 as oldest_waiting_age_s
  from ilr.slots
 where released_at is null and key not like 'queue:%%'
"""
"""Concurrency keys and ctx.lock keys (every live ilr.slots row but the queues'): slots held,
workflows waiting, keys with a waiter, the oldest waiter's age (s). Live rows only (slots_live)."""

FIGURES_QUEUES_SQL = """
select key, count(*) filter (where slot_no is not null) as holding,
       count(*) filter (where slot_no is null and deferred_until is null) as waiting,
       count(*) filter (where deferred_until is not null) as put_off,
       extract(epoch from now() - min(queued_at) filter (where slot_no is null))::float8 as oldest_waiting_age_s
  from ilr.slots where released_at is null and key = any(%(keys)s::text[])
 group by key
"""
"""Per ILR_QUEUES queue key ('queue:' || name): holders, waiters (the queue's depth), starts put
off by their key's rate, and the oldest waiter's age (s)."""

FIGURES_OLDEST_APPROVALS_SQL = """
select id, workflow_id, action, summary, amount_cents, requested_at, expires_at,
       extract(epoch from now() - requested_at)::float8 as age_s
  from ilr.approval_requests
 where status = 'pending'
 order by requested_at, id
 limit %(items)s
"""
"""The oldest pending approval requests, oldest first (approval_requests_pending)."""

FIGURES_AMBIGUOUS_SQL = """
select effect_id, workflow_id, target, tier, sends, first_dispatched_at, last_error->>'message' as last_error
  from ilr.effects
 where state = 'ambiguous' and reconciled is null
 order by first_dispatched_at nulls last, effect_id
 limit %(items)s
"""
"""The oldest ambiguous effects no person has reconciled, by first send."""

FIGURES_STUCK_SQL = """
(select id, name, version, status, updated_at as since, coalesce(error->>'type', 'stuck') as why
   from ilr.workflows where status = 'stuck' order by updated_at, id limit %(items)s)
union all
(select id, name, version, status, lease_expires_at,
        'lease of ' || coalesce(owner, 'no worker') || ' lapsed, not taken over'
   from ilr.workflows
  where status = 'running' and lease_expires_at <= now() - make_interval(secs => %(stuck_after)s)
  order by lease_expires_at, id limit %(items)s)
"""
"""The oldest stuck workflows (status 'stuck', with the error's type: CrashLoop, NonDeterminism,
SuspendSwallowed...) and the running ones whose lease lapsed more than ``stuck_after`` s ago
with no worker taking them over."""

FIGURES_INDEXES = ("ilr.wf_stuck", "ilr.effects_ambiguous")
"""The two partial indexes of migration 0022 that make the stuck list and the ambiguous effects
index scans; ``manage.py bench_figures`` measures the read with them and without them (dropped in a
transaction it rolls back; results/figures_cost.md)."""
