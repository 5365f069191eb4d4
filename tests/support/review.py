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
        "insert into ilr.deployments (name, version, code_sha256) values ('refund', %s, 'sha') on conflict do nothing",
        (REFUND_VERSION,),
    )
    sql(
        rt,
        "insert into ilr.workflows (id, name, version, input, status, epoch, available_at, waiting) "
        "values (%s, 'refund', %s, %s::jsonb, %s, 1, 'infinity', %s::jsonb)",
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
        "insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, epoch) values "
        "(%s, 1, 'pick_amount', 'decide', 'h', %s::jsonb, 1), (%s, %s, %s, 'step', null, %s::jsonb, 1)",
        (wf_id, json.dumps(decision), wf_id, REQUEST_SEQ, f"approval_request:refund:{wf_id}", json.dumps(step)),
    )
    sql(
        rt,
        "insert into ilr.approval_requests (id, workflow_id, seq, target, action, effect_key, payload, "
        "payload_hash, amount_cents, premises, decision, summary, approvals_needed, expires_at) values "
        "(%s, %s, %s, 'local-refunds', 'refund', %s, %s::jsonb, %s, %s, %s::jsonb, %s::jsonb, %s, %s, "
        "now() + interval '1 day')",
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
        "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, grant_id, "
        "first_dispatched_at, send_deadline, settle_margin, sends) values (%s, %s, 'local-refunds', 3, %s::jsonb, "
        "%s, %s, %s, now(), now() + interval '3 s', interval '5 s', 1)",
        (effect_id, wf_id, json.dumps({"payment": "pay_1", "amount": 2000}), proposal_hash(), state, grant_id),
    )


def counts(rt):
    """Everything an action could write."""
    row = sql(
        rt,
        "select (select count(*) from ilr.grants) as grants, (select count(*) from ilr.signals) as signals, "
        "(select count(*) from ilr.effects where reconciled is not null) as reconciled, "
        "(select count(*) from ilr.grants where revoked_at is not null) as revoked, "
        "(select count(*) from ilr.deployments where retired_at is not null) as retired, "
        "(select count(*) from ilr.workflows where cancel_requested_at is not null) as cancels",
    ).fetchone()
    decided = sql(
        rt, "select count(*) as n from ilr.approval_requests where status <> 'pending' or approvals <> '[]'"
    ).fetchone()["n"]
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
    conn.execute(
        "insert into ilr.deployments (name, version, code_sha256) values ('i', '1', 'x') on conflict do nothing"
    )
    conn.execute("insert into ilr.workflows (id, name, version, input) values ('wf-i', 'i', '1', '{}')")
    payload = {"payment": "pay_i", "amount": 2000}
    conn.execute(
        "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) "
        "values (%s, 'wf-i', 'refunds', 1, %s::jsonb, %s)",
        (effect_id, json.dumps(payload), codec.payload_hash(payload)),
    )
    by = {"workflow_id": "wf-i", "epoch": 1}
    with conn.transaction():
        cur = conn.cursor()
        cur.execute("select 1 from ilr.effects where effect_id = %s for update", (effect_id,))
        journal.append(cur, effect_id, "PROPOSED", 1.0, {"effect": payload, "agent": "a", "lease": None})
        journal.append(cur, effect_id, "AUTHORIZED", 1.0, {"lease": None})
        journal.append(cur, effect_id, "DISPATCHED", 1.0, {"effect": payload, "by": by})
        cur.execute("update ilr.effects set state = 'dispatched', sends = 1 where effect_id = %s", (effect_id,))
    if commit:
        commit_chain(rt, effect_id)
    return effect_id


def commit_chain(rt, effect_id: str) -> None:
    """The effect committed: its row's state and the COMMITTED entry in one transaction."""
    conn = rt.connection()
    with conn.transaction():
        cur = conn.cursor()
        cur.execute("update ilr.effects set state = 'committed' where effect_id = %s", (effect_id,))
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
