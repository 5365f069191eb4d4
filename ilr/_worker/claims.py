"""A claim of a workflow: the claim transaction, the lease renewal and the release
statements, and ``Run``, the claim as a worker holds it with its local lease (docs/protocol.md
§3.1 to §3.3).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ilr._db.batch import Batch
from ilr._errors import Fenced

if TYPE_CHECKING:
    from ilr._context.context import WorkflowContext

CLAIM_SQL = """
with expired as (
  select id, status as prev_status, lease_expires_at as prev_lease
    from ilr.workflows
   where status = 'running' and lease_expires_at <= now()
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by id
   limit %(n)s
   for update skip locked),
due as (
  select id, status as prev_status, lease_expires_at as prev_lease
    from ilr.workflows
   where status in ('pending','sleeping') and available_at <= now()
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by available_at
   limit %(n)s
   for update skip locked),
c as (select * from expired union all select * from due limit %(n)s),
u as (
  update ilr.workflows w
     set status = 'running', epoch = ilr.next_epoch(w.epoch), owner = %(owner)s,
         takeovers = w.takeovers + (c.prev_status = 'running')::int,
         lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
    from c
   where w.id = c.id
  returning w.id, w.name, w.version, w.input, w.epoch, w.waiting, w.takeovers, w.parent_id,
            w.cancel_requested_at, w.lease_expires_at, c.prev_status, c.prev_lease,
            coalesce((w.waiting->>'until')::timestamptz <= now(), true) as waiting_due,
            case when w.parent_id is null and w.continued_from is null then w.created_at
                 else ilr.lineage_created_at(w.id) end as born_at,
            now() as now),
h as (
  insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at,
                          prev_status, prev_lease_expires_at)
  select id, epoch, %(owner)s, version, now, lease_expires_at, prev_status, prev_lease from u)
select * from u
"""
"""The claim (docs/protocol.md §3.1), in two scans: lapsed leases (takeovers) first, then due
rows oldest first.

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

STEPS_OF_THIS_CLAIM_SQL = """
select s.workflow_id, s.seq, s.name, s.kind, s.fingerprint, s.output, s.error
  from ilr.workflows w
  join ilr.steps s on s.workflow_id = w.id
 where w.status = 'running' and w.owner = %(owner)s
   and w.lease_expires_at = now() + make_interval(secs => %(ttl)s)
 order by s.workflow_id, s.seq
"""
"""The step rows of the workflows the claim statement before it (same transaction) took.

A claimed row has exactly this transaction's now() + ttl as its lease (wf_running serves the
lookup: the running rows, filtered by lease). The statement runs after the claim statement and
takes its own snapshot then (READ COMMITTED), so it sees every step committed before the claim
locked the rows; a previous owner's later write is refused by its fence. Rows of another
transaction with the same lease value would only add rows for ids this claim did not take; the
caller keeps only its ids.
"""


def claim_due(conn, params: dict) -> tuple[list[dict], list[dict]]:
    """The claim transaction: CLAIM_SQL, then STEPS_OF_THIS_CLAIM_SQL, in one Batch (one round
    trip, one commit; both statements prepared on ``conn`` as Batch prepares, below its cap).

    Args:
        conn: an idle autocommit connection from db.connect.
        params: CLAIM_SQL's parameters (names, versions, n, owner, ttl in seconds).

    Returns:
        (the claimed workflow rows, their step rows ordered by workflow and seq); no step rows
        when nothing was claimed.
    """
    with Batch(conn) as claim:
        claim_cur = claim.execute(CLAIM_SQL, params)
        steps_cur = claim.execute(STEPS_OF_THIS_CLAIM_SQL, params)
    rows = claim_cur.fetchall()
    return rows, (steps_cur.fetchall() if rows else [])


HEARTBEAT_SQL = """
update ilr.workflows w
   set lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
  from unnest(%(ids)s::text[], %(epochs)s::bigint[]) as a(id, epoch)
 where w.id = a.id and w.epoch = a.epoch and w.status = 'running' and w.lease_expires_at > now()
returning w.id, w.epoch, w.cancel_requested_at
"""

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


class Run:
    """One claim of one workflow, as the worker holds it.

    The local lease (docs/protocol.md §3.3): ``t0 = time.monotonic()`` is read before each
    transaction that renews the lease (the claim, every fenced write, every heartbeat), and
    ``local_lease = t0 + lease_ttl``. t0 precedes the transaction's now(), so under A5 (a
    worker's monotonic clock runs no faster than the database clock) local_lease <=
    lease_expires_at. A body that checks ``monotonic() < local_lease`` therefore starts before
    any successor could claim, so before any successor's step row exists (NoRerunAfterComplete).
    Residual, A1: a pause between the check and the body start.
    """

    def __init__(self, row: dict, lease_ttl: float, t0: float, steps: dict[int, dict] | None = None):
        self.workflow_id: str = row["id"]
        self.name: str = row["name"]
        self.version: str = row["version"]
        self.input = row["input"]
        self.epoch: int = row["epoch"]
        self.waiting: dict | None = row["waiting"]
        self.waiting_due: bool = row["waiting_due"]
        self.takeovers: int = row["takeovers"]
        self.parent_id: str | None = row.get("parent_id")
        self.cancel_requested = row["cancel_requested_at"] is not None
        self.lease_ttl = lease_ttl
        self.claimed_t0 = t0  # monotonic time before the claim transaction
        self.local_lease = t0 + lease_ttl
        self.fenced = False
        self.released = False
        self.steps = steps  # the step rows read with the claim, by seq; None: load them
        self.born_at = row.get("born_at")  # the earliest created_at of its lineage (ilr.failover)
        self.failover: dict | None = None  # the worker's last timeline switch at the claim (ilr.failover)
        self.context: WorkflowContext | None = None  # set when the run starts; holds its connection

    clock = staticmethod(time.monotonic)

    def renewed(self, t0: float, cancel_requested_at) -> None:
        """A lease-renewing transaction that began at monotonic ``t0`` committed."""
        self.local_lease = max(self.local_lease, t0 + self.lease_ttl)
        if cancel_requested_at is not None:
            self.cancel_requested = True

    def require_local_lease(self) -> None:
        """Raise Fenced unless this claim is still live by the local clock (docs/protocol.md §3.3).

        Called right before a step body, a decide call or a send starts.
        """
        if self.fenced or time.monotonic() >= self.local_lease:
            self.fenced = True
            raise Fenced(f"workflow {self.workflow_id}: local lease of epoch {self.epoch} ran out")
