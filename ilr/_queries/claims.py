"""Statements on ilr.claims: claims, leases and takeovers."""

from __future__ import annotations

MIGRATE_IN_INSERT_CLAIMS = (
    "insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at, "
    "prev_status) values (%s, %s, %s, %s, %s, %s, %s)"
)
"""Insert into ilr.claims (``_ops.deployments.migrate_in``)."""

FORK_IN_INSERT_CLAIMS = (
    "insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at, "
    "prev_status) values (%s, 1, %s, %s, now(), now(), 'pending')"
)
"""Insert into ilr.claims (``_ops.workflow_ops.fork_in``)."""


# -- from _worker/claims.py ---------------------------------------------------------------------

CLAIM_SQL = """
with expired as (
  select id, status as prev_status, lease_expires_at as prev_lease, owner as prev_owner
    from ilr.workflows
   where status = 'running' and lease_expires_at <= now()
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by id
   limit %(n)s
   for update skip locked),
due_high as (
  select id, status as prev_status, lease_expires_at as prev_lease, owner as prev_owner
    from ilr.workflows
   where status in ('pending','sleeping') and priority <> 0 and priority > 0 and available_at <= now()
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by priority desc, available_at
   limit %(n)s
   for update skip locked),
due as (
  select id, status as prev_status, lease_expires_at as prev_lease, owner as prev_owner
    from ilr.workflows
   where status in ('pending','sleeping') and available_at <= now() and priority = 0
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by available_at
   limit %(n)s
   for update skip locked),
due_low as (
  select id, status as prev_status, lease_expires_at as prev_lease, owner as prev_owner
    from ilr.workflows
   where status in ('pending','sleeping') and priority <> 0 and priority < 0 and available_at <= now()
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by priority desc, available_at
   limit %(n)s
   for update skip locked),
c as (select * from expired union all select * from due_high union all select * from due
      union all select * from due_low limit %(n)s),
u as (
  update ilr.workflows w
     set status = 'running', epoch = ilr.next_epoch(w.epoch), owner = %(owner)s,
         takeovers = w.takeovers + (c.prev_status = 'running')::int,
         lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
    from c
   where w.id = c.id
  returning w.id, w.name, w.version, w.input, w.epoch, w.waiting, w.takeovers, w.parent_id, w.trace_context,
            w.cancel_requested_at, w.lease_expires_at, c.prev_status, c.prev_lease, c.prev_owner,
            coalesce((w.waiting->>'until')::timestamptz <= now(), true) as waiting_due,
            case when w.parent_id is null and w.continued_from is null then w.created_at
                 else ilr.lineage_created_at(w.id) end as born_at,
            extract(epoch from now() - case when c.prev_status = 'running' then c.prev_lease
                                            else w.available_at end)::float8 as schedule_to_start,
            now() as now),
h as (
  insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at,
                          prev_status, prev_lease_expires_at)
  select id, epoch, %(owner)s, version, now, lease_expires_at, prev_status, prev_lease from u)
select * from u
"""
"""The claim (docs/protocol.md §3.1), in four scans: lapsed leases (takeovers) first, then due
rows by priority (higher first), oldest first within one priority.

Due rows of priority 0 (nearly all) come from wf_due; the others from wf_due_priority, which holds
only them: the rows above 0 are scanned before wf_due, those below after it. With no such rows
the two extra scans each read one empty index page. ``priority <> 0`` is written out beside
``priority > 0`` so that the planner matches wf_due_priority's predicate.

``schedule_to_start`` is the seconds from the moment the row was due (its available_at, or a
lapsed lease's expiry) to this claim (the ``interlock.workflow.schedule_to_start`` metric).

Each scan follows one partial index and stops after the rows it locks: wf_due in available_at
order for the due rows, and wf_running in id order for the lapsed leases. A single
``where (due) or (lapsed) order by available_at`` can only be planned as a bitmap scan of both
indexes plus a sort of every due row, so each claim would read and sort the whole backlog
(tests/integration/test_claim_plan.py reads the plan). ``order by id`` keeps the lapsed-lease scan a plain
index scan, which marks the index entries of rows that left 'running' dead as it passes them;
a bitmap scan would visit them again on every claim until vacuum. A CTE is read only as far as
its reader asks, so ``c``'s LIMIT stops the due scan, and its row locks, once lapsed leases and
due rows together fill ``n``. Takeovers first: a lapsed lease is work that was already started.
"""

CLAIM_PRELOAD_SEQS = 500
"""The claim reads each claimed workflow's step rows of seq 1 to this; a longer history's later
rows are read in pages as its replay reaches them (``_context.history.History``)."""

STEPS_OF_THIS_CLAIM_SQL = f"""
select s.workflow_id, s.seq, s.name, s.kind, s.fingerprint, s.output, s.error
  from ilr.workflows w
  join ilr.steps s on s.workflow_id = w.id
 where w.status = 'running' and w.owner = %(owner)s
   and w.lease_expires_at = now() + make_interval(secs => %(ttl)s)
   and s.seq <= {CLAIM_PRELOAD_SEQS}
 order by s.workflow_id, s.seq
"""
"""The step rows of seq 1 to CLAIM_PRELOAD_SEQS of the workflows the claim statement before it
(same transaction) took: the whole history of nearly every workflow, in the claim's round trip,
while a claim of a long history holds one page of it, not all (a bound on seq, not a row limit,
so that the rows read are exactly those up to it, whatever the history's gaps).

A claimed row has exactly this transaction's now() + ttl as its lease (wf_running serves the
lookup: the running rows, filtered by lease). The statement runs after the claim statement and
takes its own snapshot then (READ COMMITTED), so it sees every step committed before the claim
locked the rows; a previous owner's later write is refused by its fence. Rows of another
transaction with the same lease value would only add rows for ids this claim did not take; the
caller keeps only its ids.
"""

HEARTBEAT_SQL = """
update ilr.workflows w
   set lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
  from unnest(%(ids)s::text[], %(epochs)s::bigint[]) as a(id, epoch)
 where w.id = a.id and w.epoch = a.epoch and w.status = 'running' and w.lease_expires_at > now()
returning w.id, w.epoch, w.cancel_requested_at
"""
"""Renew the leases of a worker's runs, one statement for all (ids and epochs as arrays); a run
whose epoch moved on or whose lease lapsed returns no row (``_worker.heartbeat``)."""

RELEASE_SQL = """
update ilr.workflows w
   set status = 'pending', owner = null, lease_expires_at = null, available_at = now(), updated_at = now()
  from unnest(%(ids)s::text[], %(epochs)s::bigint[]) as a(id, epoch)
 where w.id = a.id and w.epoch = a.epoch and w.status = 'running' and w.owner = %(owner)s
returning w.id, w.epoch
"""
"""Give back claims this worker abandoned for a database fault: due now, epoch kept, takeovers
untouched (the next claim sees prev_status 'pending', so it counts no takeover).

No lease test, on purpose: a claim at this epoch that is still 'running' is held by nobody
else (every claim bumps the epoch), lapsed or not; releasing it is the takeover it would get,
without counting one. Races: a claim of the same row locks it FOR UPDATE SKIP LOCKED. When the
release holds the lock, the claim skips the row and the next claim finds it pending; when the
claim holds it, the release waits, re-reads the row at the new epoch and matches nothing. Only
runs that returned are released, so no body of that epoch is still executing when a successor
may start one (the local-lease argument of ``Run`` needs no lapse here)."""


WAKEUP_CHANNEL = "ilr_claimable"
"""The NOTIFY channel of ilr.notify_claimable() (migration 0003)."""

LISTEN_WAKEUPS_SQL = f"listen {WAKEUP_CHANNEL}"
"""Listen for the wakeups of claimable work (``_worker.worker.Worker._listen_loop``)."""
