"""Approval requests (``ctx.request_approval``) on real PostgreSQL, real worker subprocesses and
the real HTTP payment target: approve sends once under a grant bound to the exact payload and
the facts captured; reject, expiry and cancel return or raise without a send; the two-person
rule needs two different people; a worker killed while the request waits is replaced without a
second request. Workflow: tests.support.flows.asks_approval.
"""

from __future__ import annotations

import pytest

from ilr import ApprovalRefused, InvalidInput
from ilr import _codec as codec
from tests.support.queries.approvals import COUNT_APPROVAL_REQUESTS
from tests.support.queries.grants import ALL_OF_GRANTS_BY_ID, COUNT_GRANTS
from tests.support.refund_harness import refund_env
from tests.support.waits import failure_of, wait_for


def _start(rt, env, wf_id: str, amount: int = 1500, **extra) -> dict:
    case = env.case(wf_id)
    rt.start(
        "asks_approval",
        wf_id,
        {"url": env.target_url, "payment": case["payment"], "amount": amount, "key": f"refund:{wf_id}", **extra},
    )
    return case


def _pending(rt, wf_id: str) -> dict:
    def found():
        d = rt.describe(wf_id)
        assert d["status"] not in ("completed", "failed", "stuck"), (d["status"], d["error"], d["result"])
        rows = [r for r in rt.approval_requests() if r["workflow_id"] == wf_id]
        return rows[0] if rows and d["status"] == "sleeping" else None

    return wait_for(found, timeout=30, message=f"{wf_id} waiting on its approval request")


def test_approved_request_sends_once_under_a_grant_bound_to_the_payload(rt, workers, tmp_path):
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        case = _start(rt, env, "apr-ok")
        req = _pending(rt, "apr-ok")
        assert req["payload"] == {"payment": case["payment"], "amount": 1500}
        assert req["summary"] == "Refund 1500 cents" and req["action"] == "refund" and req["approvals_needed"] == 1
        assert req["premises"]["payment"] == case["payment"] and req["amount_cents"] == 1500
        # The raw approve path refuses it, naming the request to approve instead (it said "not
        # waiting for approval (status sleeping)": a fresh user's find), and writes nothing.
        with pytest.raises(InvalidInput) as err:
            rt.approve("apr-ok", req["payload"], req["premises"], by="alice")
        assert err.value.field == "workflow_id" and repr(req["id"]) in err.value.rule, err.value
        assert "rt.approve_request" in err.value.rule
        assert rt.connection().execute(COUNT_GRANTS).fetchone()["n"] == 0
        after = rt.approve_request(req["id"], by="alice")
        assert after["status"] == "approved" and [a["by"] for a in after["approvals"]] == ["alice"]
        result = rt.result("apr-ok", timeout=30)
        assert result["status"] == "COMMITTED" and result["approved_by"] == ["alice"], result
        grant = rt.connection().execute(ALL_OF_GRANTS_BY_ID, (after["grant_id"],)).fetchone()
        assert grant["payload_hash"] == codec.payload_hash(req["payload"]) == req["payload_hash"]
        assert grant["facts_seen"] == req["premises"] and grant["max_cents"] == 1500
        assert grant["granted_by"] == "alice" and grant["principal"] == "asks_approval"
        assert [(r["payment"], r["amount"]) for r in env.ledger(case["payment"])] == [(case["payment"], 1500)]
        with pytest.raises(ApprovalRefused, match="approved already"):
            rt.approve_request(req["id"], by="bob")


def test_rejected_request_returns_none_with_the_reason_and_sends_nothing(rt, workers, tmp_path):
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        case = _start(rt, env, "apr-no")
        req = _pending(rt, "apr-no")
        with pytest.raises(InvalidInput, match="reason"):
            rt.reject_request(req["id"], by="alice", reason="")
        assert rt.approval_request(req["id"])["status"] == "pending"  # the refused reject wrote nothing
        rt.reject_request(req["id"], by="alice", reason="customer already refunded by phone")
        assert rt.result("apr-no", timeout=30) == {
            "status": "rejected",
            "by": "alice",
            "reason": "customer already refunded by phone",
        }
        assert env.ledger(case["payment"]) == []
        with pytest.raises(ApprovalRefused, match="rejected already"):
            rt.approve_request(req["id"], by="bob")


def test_expired_request_is_refused_and_the_workflow_reads_expired(rt, workers, tmp_path):
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        case = _start(rt, env, "apr-late", timeout=2)
        req = _pending(rt, "apr-late")
        result = rt.result("apr-late", timeout=30)
        assert result["status"] == "expired" and "expired" in result["reason"], result
        with pytest.raises(ApprovalRefused, match="expired"):
            rt.approve_request(req["id"], by="alice")
        assert rt.approval_request(req["id"])["status"] == "expired"
        assert env.ledger(case["payment"]) == []


def test_two_person_rule_needs_two_different_approvers(rt, workers, tmp_path):
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        # The project's rule covers "refund" (ILR_TWO_PERSON_CENTS); a "payout" has the target's own.
        case = _start(rt, env, "apr-two", amount=6000, two_person_cents=5000, action="payout")
        req = _pending(rt, "apr-two")
        assert req["approvals_needed"] == 2
        first = rt.approve_request(req["id"], by="alice")
        assert first["status"] == "pending" and first["grant_id"] is None
        with pytest.raises(ApprovalRefused, match="two-person rule"):
            rt.approve_request(req["id"], by="alice")
        assert rt.describe("apr-two")["status"] == "sleeping"  # one approval does not wake it
        second = rt.approve_request(req["id"], by="bob")
        assert second["status"] == "approved" and [a["by"] for a in second["approvals"]] == ["alice", "bob"]
        result = rt.result("apr-two", timeout=30)
        assert result["status"] == "COMMITTED" and result["approved_by"] == ["alice", "bob"], result
        assert len(env.ledger(case["payment"])) == 1


def test_request_survives_a_worker_kill_without_a_second_request(rt, workers, tmp_path):
    """w1 writes the request and suspends; it is SIGKILLed; the approval arrives while no worker
    runs; w2 replays the request step from the steps table and sends once."""
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        case = _start(rt, env, "apr-kill")
        req = _pending(rt, "apr-kill")
        workers.kill("w1")
        rt.approve_request(req["id"], by="alice")
        workers.start("w2")
        assert rt.result("apr-kill", timeout=30)["status"] == "COMMITTED"
        rows = [
            {"id": r["id"], "status": r["status"]}
            for r in rt.approval_requests(status=None)
            if r["workflow_id"] == "apr-kill"
        ]
        assert rows == [{"id": req["id"], "status": "approved"}]
        assert len(env.ledger(case["payment"])) == 1


def test_cancel_while_waiting_marks_the_request_cancelled(rt, workers, tmp_path):
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        _start(rt, env, "apr-cancel")
        req = _pending(rt, "apr-cancel")
        rt.cancel("apr-cancel", by="carol")
        wait_for(lambda: rt.describe("apr-cancel")["status"] == "cancelled", timeout=30, message="cancelled")
        assert rt.approval_request(req["id"])["status"] == "cancelled"
        with pytest.raises(ApprovalRefused):
            rt.approve_request(req["id"], by="alice")


@pytest.mark.parametrize(
    "bad, field, words",
    [
        ("target_none", "target", "tier of 1, 2 or 3, got NoneType"),
        ("target_no_apply", "target", "apply(effect_id, payload)"),
        ("target_unregistered", "target", "no target is registered under the name 'no-such-target'"),
        ("premises_list", "premises", "JSON object of facts"),
        ("premises_callable_list", "premises", "the callable must return a JSON object"),
        ("decision_str", "decision", "Decision.ref"),
        ("decision_foreign", "decision", "must cite a decision of this workflow ('abi'), got 'another-case'"),
    ],
)
def test_a_bad_request_approval_argument_fails_the_workflow_naming_it(rt, workers, bad, field, words):
    workers.start("w1")
    rt.start("approval_bad_input", "abi", {"bad": bad})
    error = failure_of(rt, "abi")
    assert error["type"] == "InvalidInput" and error["field"] == field and words in error["rule"], error
    assert rt.connection().execute(COUNT_APPROVAL_REQUESTS).fetchone()["n"] == 0
