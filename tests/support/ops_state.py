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

PENDING_APPROVALS = 2
OLDEST_APPROVAL_AGE = 120
DUE_V1 = 3


def _wf(c, wf_id: str, status: str, version: str = "v1", extra: str = "", values: tuple = ()) -> None:
    cols = "id, name, version, input, status, epoch" + (", " + extra if extra else "")
    marks = ", ".join(["%s"] * len(values))
    c.execute(
        f"insert into ilr.workflows ({cols}) values (%s, 'refund', %s, '{{}}'::jsonb, %s, 1"
        + (", " + marks if values else "")
        + ")",
        (wf_id, version, status, *values),
    )


def seed(conn) -> None:
    """Write the state the module docstring lists on ``conn`` (an autocommit psycopg connection)."""
    c = conn
    for version in ("v1", "v2"):
        c.execute(
            "insert into ilr.deployments (name, version, code_sha256) values ('refund', %s, 'sha') "
            "on conflict do nothing",
            (version,),
        )
    for i, ago in enumerate((40, 20, 0)):
        c.execute(
            "insert into ilr.workflows (id, name, version, input, status, available_at) values "
            "(%s, 'refund', 'v1', '{}'::jsonb, 'pending', now() - make_interval(secs => %s))",
            (f"due-{i}", ago),
        )
    for wf_id, ago, status in (("apr-old", 120, "pending"), ("apr-new", 30, "pending"), ("apr-no", 300, "rejected")):
        _wf(c, wf_id, "sleeping", extra="available_at", values=("infinity",))
        payload = {"payment": f"pay_{wf_id}", "amount": 1000}
        decided = status != "pending"
        c.execute(
            "insert into ilr.approval_requests (id, workflow_id, seq, target, action, effect_key, payload, "
            "payload_hash, amount_cents, summary, status, requested_at, expires_at, decided_at, decided_by) "
            "values (%s, %s, 1, 'local-refunds', 'refund', %s, %s::jsonb, %s, 1000, %s, %s, "
            "now() - make_interval(secs => %s), now() + interval '1 hour', "
            "case when %s then now() end, case when %s then 'carol' end)",
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
            "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, "
            "first_dispatched_at, send_deadline, settle_margin, sends, reconciled) values (%s, 'amb-wf', "
            "'local-refunds', 3, %s::jsonb, %s, 'ambiguous', now() - interval '1 hour', now(), interval '5 s', 1, "
            "%s::jsonb)",
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
    c.execute("update ilr.workflows set lease_expires_at = now() - interval '600 s' where id = 'lapsed-1'")
    _wf(c, "key-holder", "sleeping", version="v2", extra="available_at", values=("infinity",))
    _wf(c, "key-waiter", "pending", version="v2", extra="available_at", values=("infinity",))
    c.execute(
        "insert into ilr.slots (key, workflow_id, slot_limit, slot_no, queued_at, acquired_at) values "
        "('acct:1', 'key-holder', 1, 0, now() - interval '50 s', now() - interval '50 s'), "
        "('acct:1', 'key-waiter', 1, null, now() - interval '45 s', null)"
    )
    c.execute(
        "insert into ilr.schedules (id, workflow_name, input, every_s, next_tick_at, next_fire_at) values "
        "('late', 'refund', '{}', 60, now() - interval '120 s', now() - interval '120 s')"
    )
    c.execute(
        "insert into ilr.schedules (id, workflow_name, input, every_s, next_tick_at, next_fire_at, paused) values "
        "('held', 'refund', '{}', 60, now() - interval '900 s', now() - interval '900 s', true)"
    )
