"""A claim of a workflow: the claim transaction, the lease renewal and the release
statements, and ``Run``, the claim as a worker holds it with its local lease (docs/protocol.md
§3.1 to §3.3).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ilr._db.batch import Batch
from ilr._errors import Fenced
from ilr._queries.claims import CLAIM_SQL, STEPS_OF_THIS_CLAIM_SQL

if TYPE_CHECKING:
    from ilr._context.context import WorkflowContext


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
        self.prev_status: str | None = row.get("prev_status")  # 'running': this claim is a takeover
        self.prev_lease = row.get("prev_lease")  # the lapsed lease a takeover replaced
        self.prev_owner: str | None = row.get("prev_owner")  # the worker whose lease lapsed
        self.claimed_at = row.get("now")  # the claim transaction's now()
        self.steps = steps  # the step rows read with the claim (seqs to CLAIM_PRELOAD_SEQS); None: none read
        self.history = None  # the run's History, set by its WorkflowContext (counts what _db.store writes)
        self.born_at = row.get("born_at")  # the earliest created_at of its lineage (ilr.failover)
        self.failover: dict | None = None  # the worker's last timeline switch at the claim (ilr.failover)
        self.owner: str | None = None  # the worker running it (set by run_workflow)
        self.context: WorkflowContext | None = None  # set when the run starts; holds its connection
        self.took_over = row.get("prev_status") == "running"  # the claim took a lapsed lease
        self.schedule_to_start: float | None = row.get("schedule_to_start")  # seconds from due to claim
        self.ended: str | None = None  # the terminal status this claim's fenced end committed
        self.span = None  # the run's span while telemetry is on (ilr._telemetry.tracing)
        self.trace_context: str | None = row.get("trace_context")  # the W3C traceparent it was started from
        self.trace_parent = False  # its parsed SpanContext, read once (ilr._telemetry.tracing.started_from)
        self.span_token = None

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
