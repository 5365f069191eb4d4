"""A database state with one of each thing the operations figures count (issue 46), written with
plain SQL on the emptied test database, as tests/integration/test_reconcile.py writes its
ambiguous effect: no worker is needed to reach these states, and each count is known.

``seed(conn)`` writes, besides whatever the test made itself:

- refund@v1 and refund@v2 deployed; three refund@v1 workflows due (pending, available 40 s,
  20 s and 0 s ago) and no worker for v1: refund@v1 is unserved with 3 due;
- two pending approval requests (asked 120 s and 30 s ago) and one rejected;
- one ambiguous effect not reconciled, one reconciled;
- one workflow stuck (CrashLoop), one running whose lease of worker "gone" lapsed 600 s ago;
- concurrency key "acct:1" with one holder and one waiter;
- one schedule 120 s past its fire time, one paused (not overdue).
"""

from __future__ import annotations

import json

from ilr import _codec as codec
from tests.support.queries.approvals import SEED_APPROVAL_REQUESTS_WITH_STATUS
from tests.support.queries.deployments import SEED_DEPLOYMENTS_REFUND_VERSION
from tests.support.queries.effects import SEED_EFFECTS_AMB_WF
from tests.support.queries.schedules import SEED_SCHEDULES_HELD, SEED_SCHEDULES_LATE
from tests.support.queries.slots import SEED_SLOTS
from tests.support.queries.workflows import (
    SEED_WORKFLOWS_REFUND_3,
    SET_WORKFLOWS_LEASE_EXPIRES_AT_BY_ID_600_S,
    seed_workflow,
)

PENDING_APPROVALS = 2
OLDEST_APPROVAL_AGE = 120
DUE_V1 = 3


def _wf(c, wf_id: str, status: str, version: str = "v1", extra: str = "", values: tuple = ()) -> None:
    cols = "id, name, version, input, status, epoch" + (", " + extra if extra else "")
    marks = ", ".join(["%s"] * len(values))
    c.execute(
        seed_workflow(cols, marks if values else ""),
        (wf_id, version, status, *values),
    )


def seed(conn) -> None:
    """Write the state the module docstring lists on ``conn`` (an autocommit psycopg connection)."""
    c = conn
    for version in ("v1", "v2"):
        c.execute(
            SEED_DEPLOYMENTS_REFUND_VERSION,
            (version,),
        )
    for i, ago in enumerate((40, 20, 0)):
        c.execute(
            SEED_WORKFLOWS_REFUND_3,
            (f"due-{i}", ago),
        )
    for wf_id, ago, status in (("apr-old", 120, "pending"), ("apr-new", 30, "pending"), ("apr-no", 300, "rejected")):
        _wf(c, wf_id, "sleeping", extra="available_at", values=("infinity",))
        payload = {"payment": f"pay_{wf_id}", "amount": 1000}
        decided = status != "pending"
        c.execute(
            SEED_APPROVAL_REQUESTS_WITH_STATUS,
            (
                f"apr_{wf_id}",
                wf_id,
                f"refund:{wf_id}",
                json.dumps(payload),
                codec.payload_hash(payload),
                f"Refund for {wf_id}",
                status,
                ago,
                decided,
                decided,
            ),
        )
    _wf(c, "amb-wf", "completed")
    for effect_id, reconciled in (("eff_ops_amb", None), ("eff_ops_done", {"who": "carol", "applied": True})):
        payload = {"payment": effect_id, "amount": 500}
        c.execute(
            SEED_EFFECTS_AMB_WF,
            (
                effect_id,
                json.dumps(payload),
                codec.payload_hash(payload),
                json.dumps(reconciled) if reconciled else None,
            ),
        )
    _wf(c, "stuck-1", "stuck", extra="error", values=(json.dumps({"type": "CrashLoop", "message": "crash loop"}),))
    _wf(
        c,
        "lapsed-1",
        "running",
        version="v2",
        extra="owner, lease_expires_at",
        values=("gone", "-infinity"),
    )
    c.execute(SET_WORKFLOWS_LEASE_EXPIRES_AT_BY_ID_600_S)
    _wf(c, "key-holder", "sleeping", version="v2", extra="available_at", values=("infinity",))
    _wf(c, "key-waiter", "pending", version="v2", extra="available_at", values=("infinity",))
    c.execute(SEED_SLOTS)
    c.execute(SEED_SCHEDULES_LATE)
    c.execute(SEED_SCHEDULES_HELD)
