"""Rows as the runtime leaves them, written with plain SQL (a refund waiting on its approval
request, an ambiguous effect, an effect's signed chain), and what the review UI's tests read them
with: users with permissions, logged-in clients, the admin's pages, the text an approver must not be
misled by. (Approve and reject run the runtime's own transaction bodies, in the tests.)"""

from __future__ import annotations

import json

from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from demo.workflows import REFUND_VERSION
from ilr import _codec as codec
from ilr._journal import journal
from ilr._ops.approval_requests import request_id_for, signal_name
from tests.support.queries.approvals import (
    COUNT_APPROVAL_REQUESTS_BY_STATUS_APPROVALS,
    SEED_APPROVAL_REQUESTS_WITH_PREMISES,
)
from tests.support.queries.deployments import SEED_DEPLOYMENTS_I, SEED_DEPLOYMENTS_REFUND_VERSION
from tests.support.queries.effects import (
    LOCK_EFFECTS_BY_EFFECT_ID,
    SEED_EFFECTS_LOCAL_REFUNDS_2,
    SEED_EFFECTS_WF_I,
    SET_EFFECTS_STATE_BY_EFFECT_ID,
    SET_EFFECTS_STATE_SENDS_BY_EFFECT_ID,
)
from tests.support.queries.grants import COUNTS_OF_GRANTS_SIGNALS_RECONCILED_REVOKED_RETIRED_CANCELS
from tests.support.queries.steps import SEED_STEPS_PICK_AMOUNT
from tests.support.queries.workflows import SEED_WORKFLOWS_REFUND_4, SEED_WORKFLOWS_WF_I

FACTS = {"payment": "pay_1", "eligible": True, "refunded_by_others": 0}
REQUEST_SEQ = 2


def sql(rt, query, params=()):
    return rt.connection().execute(query, params)


def rid(wf_id="case-1") -> str:
    """The request id of make_waiting's request."""
    return request_id_for(wf_id, REQUEST_SEQ)


def make_waiting(rt, wf_id="case-1", amount=2000, facts=None, status="sleeping", needed=1):
    """A refund waiting on its approval request, as the runtime leaves it after
    ctx.request_approval wrote the request and suspended."""
    facts = FACTS if facts is None else facts
    payment = facts.get("payment", "pay_1")
    case = {"id": wf_id, "payment": payment, "paid": 10_000, "reason": "arrived damaged"}
    request_id = rid(wf_id)
    waiting = {"seq": REQUEST_SEQ + 1, "kind": "signal", "signal": signal_name(request_id)}
    payload = {"payment": payment, "amount": amount}
    sql(
        rt,
        SEED_DEPLOYMENTS_REFUND_VERSION,
        (REFUND_VERSION,),
    )
    sql(
        rt,
        SEED_WORKFLOWS_REFUND_4,
        (wf_id, REFUND_VERSION, json.dumps(case), status, json.dumps(waiting)),
    )
    decision = {
        "model": "claude-haiku-4-5-20251001",
        "request_hash": "h",
        "usage": None,
        "captured_at": "t",
        "premises": facts,
        "response": {
            "model": "claude-haiku-4-5-20251001",
            "amount": amount,
            "reasoning": "the item arrived damaged; refund the item price",
        },
    }
    step = {"request_id": request_id, "target": "local-refunds", "action": "refund", "key": f"refund:{wf_id}"}
    sql(
        rt,
        SEED_STEPS_PICK_AMOUNT,
        (wf_id, json.dumps(decision), wf_id, REQUEST_SEQ, f"approval_request:refund:{wf_id}", json.dumps(step)),
    )
    sql(
        rt,
        SEED_APPROVAL_REQUESTS_WITH_PREMISES,
        (
            request_id,
            wf_id,
            REQUEST_SEQ,
            f"refund:{wf_id}",
            json.dumps(payload),
            codec.payload_hash(payload),
            amount,
            json.dumps(facts),
            json.dumps({"workflow_id": wf_id, "seq": 1, "request_hash": "h"}),
            f"Refund {amount / 100:.2f} of payment {payment}: arrived damaged",
            needed,
        ),
    )
    return payload


def proposal_hash(amount=2000, payment="pay_1"):
    return codec.payload_hash({"payment": payment, "amount": amount})


def make_effect(rt, effect_id="eff_1", wf_id="case-1", state="ambiguous", grant_id=None):
    sql(
        rt,
        SEED_EFFECTS_LOCAL_REFUNDS_2,
        (effect_id, wf_id, json.dumps({"payment": "pay_1", "amount": 2000}), proposal_hash(), state, grant_id),
    )


def counts(rt):
    """Everything an action could write."""
    row = sql(
        rt,
        COUNTS_OF_GRANTS_SIGNALS_RECONCILED_REVOKED_RETIRED_CANCELS,
    ).fetchone()
    decided = sql(rt, COUNT_APPROVAL_REQUESTS_BY_STATUS_APPROVALS).fetchone()["n"]
    return {**row, "requests_touched": decided, "log": LogEntry.objects.count()}


def user(username, *perms, staff=False):
    u = User.objects.create_user(username, password="pw", is_staff=staff)
    for p in perms:
        app, codename = p.split(".")
        u.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))
    return u


def client_for(u, csrf=False):
    c = Client(enforce_csrf_checks=csrf)
    c.force_login(u)
    return c


def approve_url(wf_id="case-1"):
    return reverse("approvals:approve", args=[rid(wf_id)])


def reject_url(wf_id="case-1"):
    return reverse("approvals:reject", args=[rid(wf_id)])


def text(response):
    return response.content.decode()


def admin_page(client, name="admin:ilr_workflow_changelist") -> str:
    r = client.get(reverse(name))
    assert r.status_code == 200
    return r.content.decode()


def effect_chain(rt, effect_id: str = "eff_integrity", commit: bool = True) -> str:
    """An effect and its chain written as the runtime writes them (journal.append under the row
    lock, the row's state and sends in the same transaction)."""
    conn = rt.connection()
    conn.execute(SEED_DEPLOYMENTS_I)
    conn.execute(SEED_WORKFLOWS_WF_I)
    payload = {"payment": "pay_i", "amount": 2000}
    conn.execute(
        SEED_EFFECTS_WF_I,
        (effect_id, json.dumps(payload), codec.payload_hash(payload)),
    )
    by = {"workflow_id": "wf-i", "epoch": 1}
    with conn.transaction():
        cur = conn.cursor()
        cur.execute(LOCK_EFFECTS_BY_EFFECT_ID, (effect_id,))
        journal.append(cur, effect_id, "PROPOSED", 1.0, {"effect": payload, "agent": "a", "lease": None})
        journal.append(cur, effect_id, "AUTHORIZED", 1.0, {"lease": None})
        journal.append(cur, effect_id, "DISPATCHED", 1.0, {"effect": payload, "by": by})
        cur.execute(SET_EFFECTS_STATE_SENDS_BY_EFFECT_ID, (effect_id,))
    if commit:
        commit_chain(rt, effect_id)
    return effect_id


def commit_chain(rt, effect_id: str) -> None:
    """The effect committed: its row's state and the COMMITTED entry in one transaction."""
    conn = rt.connection()
    with conn.transaction():
        cur = conn.cursor()
        cur.execute(SET_EFFECTS_STATE_BY_EFFECT_ID, (effect_id,))
        journal.append(cur, effect_id, "COMMITTED", 2.0, {"via": "first-send", "result": {"id": "re_1"}})


# Text an approver must not be misled by: each is shown escaped and flagged.
RLO = "acct_\u202e9876\u202c"
ZWSP = "pay\u200bment ref"
CYRILLIC = "p\u0430ypal"  # a Cyrillic "а" in a Latin word


def committed_journal(rt, effect_id="eff_r"):
    """Journal a refund of 2000 to pay_1 as ``effect_id``: PROPOSED, DISPATCHED under a live grant
    for that proposal, COMMITTED with the target's reference re_1."""
    conn = rt.connection()
    with conn.transaction():
        cur = conn.cursor()
        ts = cur.execute("select extract(epoch from now())::float8 as t").fetchone()["t"]
        lease = {
            "grant_id": "g1",
            "revoked": None,
            "expires_at_ts": None,
            "max_cents": 2000,
            "payload_hash": proposal_hash(),
            "action_matches": True,
        }
        payload = {"payment": "pay_1", "amount": 2000}
        journal.append(cur, effect_id, "PROPOSED", ts, {"effect": payload})
        journal.append(
            cur,
            effect_id,
            "DISPATCHED",
            ts + 0.01,
            {"effect": payload, "checks": {"lease": lease, "lease_live": True, "violations": []}},
        )
        journal.append(cur, effect_id, "COMMITTED", ts + 0.2, {"result": {"id": "re_1"}})
