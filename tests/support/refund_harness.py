"""Test helpers for refund cases: the real target and model stub as subprocesses, a case, the
approval step, a case run across a worker's SIGKILL, and the ledger oracle (it reads only the
target, as prove/harness/oracle.py does)."""

from __future__ import annotations

import contextlib
import signal
from dataclasses import dataclass, field

import pytest

from demo.peers.targets_client import http_json
from tests.support.waits import wait_for

PAID = 10_000


@dataclass
class RefundEnv:
    target_url: str
    model_url: str
    tier: int
    queryable: bool
    send_timeout: float = 2.0
    settle_margin: float = 2.0
    cases: list = field(default_factory=list)

    def worker_env(self, **extra) -> dict:
        return {"ILR_MODEL_BASE_URL": self.model_url, **extra}

    def case(self, case_id: str, *, payment: str | None = None, paid: int = PAID, **extra) -> dict:
        payment = payment or f"pay_{case_id}"
        status, _ = http_json("POST", f"{self.target_url}/admin/payments", {"id": payment, "paid": paid})
        assert status in (200, 201)
        case = {
            "id": case_id,
            "payment": payment,
            "reason": "item arrived damaged",
            "verify_after": 0,
            "target": {
                "url": self.target_url,
                "tier": self.tier,
                "queryable": self.queryable,
                "send_timeout": self.send_timeout,
                "settle_margin": self.settle_margin,
            },
            **extra,
        }
        return case

    def ledger(self, payment: str | None = None) -> list[dict]:
        rows = http_json("GET", f"{self.target_url}/ledger")[1]["rows"]
        return [r for r in rows if payment is None or r["payment"] == payment]

    def access_log(self) -> list[dict]:
        return http_json("GET", f"{self.target_url}/access_log")[1]["entries"]

    def admin(self, path: str, body: dict | None = None) -> dict:
        status, answer = http_json("POST", f"{self.target_url}/admin/{path}", body or {})
        assert status == 200, (path, status, answer)
        return answer


@contextlib.contextmanager
def refund_env(tmp_path, tier: int, queryable: bool | None = None, **kw):
    from demo.peers.model_stub import model_stub_process
    from demo.peers.target import target_process

    queryable = (tier != 3) if queryable is None else queryable
    from tests.support.workers import EVIDENCE

    with (
        target_process(tier=tier, queryable=queryable and tier == 1, ledger=tmp_path / "ledger.sqlite") as url,
        model_stub_process() as model_url,
    ):
        env = RefundEnv(url, model_url, tier, queryable, **kw)
        try:
            yield env
        finally:
            # The oracle's evidence for the invariants registry, read before the target stops.
            EVIDENCE.append({"ledger": env.ledger(), "access_log": env.access_log()})


def wait_for_approval_request(rt, wf_id: str, timeout: float = 30) -> tuple[dict, dict]:
    """Wait until the refund waits on "approve"; return (proposal, facts the decision saw)."""

    def waiting():
        d = rt.describe(wf_id)
        if d["status"] in ("failed", "stuck"):
            raise AssertionError(f"{wf_id} ended {d['status']}: {d['error']}")
        w = d["waiting"] or {}
        return d if d["status"] == "sleeping" and w.get("signal") == "approve" else None

    d = wait_for(waiting, timeout=timeout, message=f"{wf_id} waiting for approval")
    steps = {s["name"]: s for s in d["steps"]}
    return steps["propose"]["output"], steps["pick_amount"]["output"]["premises"]


def approve(rt, wf_id: str, by: str = "alice") -> tuple[str, dict]:
    proposal, facts = wait_for_approval_request(rt, wf_id)
    return rt.approve(wf_id, proposal, facts, by=by), proposal


def wait_for_request(rt, wf_id: str, timeout: float = 30) -> dict:
    """Wait until the refund (the request-based one) has a pending approval request and sleeps
    on it; return the request row."""

    def pending():
        d = rt.describe(wf_id)
        if d["status"] in ("failed", "stuck", "completed", "cancelled"):
            raise AssertionError(f"{wf_id} ended {d['status']}: {d['error']} {d['result']}")
        rows = [r for r in rt.approval_requests() if r["workflow_id"] == wf_id]
        return rows[0] if rows and d["status"] == "sleeping" else None

    return wait_for(pending, timeout=timeout, message=f"{wf_id} waiting on its approval request")


def run_case(rt, workers, env, case_id, kill_at, during_outage=None):
    """A refund on worker A, SIGKILLed at ``kill_at`` after the approval; ``during_outage(rt, env,
    case, grant_id)`` runs while no worker serves it; worker B finishes it. Returns (the case, the
    result, the proposal)."""
    a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT=kill_at))
    case = env.case(case_id)
    rt.start("refund_signal", case_id, case)
    grant_id, proposal = approve(rt, case_id)
    a.wait(30)
    assert a.returncode == -signal.SIGKILL, workers.log("A")
    if during_outage:
        during_outage(rt, env, case, grant_id)
    workers.start("B", lease_ttl=2, env=env.worker_env())
    result = rt.result(case_id, timeout=60)
    return case, result, proposal


def our_refunds(env, case):
    return [r for r in env.ledger(case["payment"]) if r["source"] == "api"]


def total(env, case):
    return sum(r["amount"] for r in env.ledger(case["payment"]))


def hand_refund(rt, env, case, grant_id):
    """During the outage: someone refunds the payment by hand at the target."""
    env.admin("hand_refund", {"payment": case["payment"], "amount": 2000})


def revoke(rt, env, case, grant_id):
    """During the outage: the grant is revoked (once; a second revoke is refused)."""
    from ilr import InvalidInput

    effect_id = rt.describe(case["id"])["effects"][0]["effect_id"]
    assert rt.revoke(grant_id, by="bob") == [effect_id]
    # Revoked once: a second revoke is refused, and its error still names what may land.
    with pytest.raises(InvalidInput) as err:
        rt.revoke(grant_id, by="carol")
    assert err.value.field == "grant_id" and "already revoked by bob" in err.value.rule
    assert err.value.rule.endswith(f"which may land: {effect_id}")


def cancelled_orphan(rt, workers, env, case_id: str) -> tuple[dict, dict]:
    """A refund cancelled with its effect left dispatched, settled; worker B stays up serving it.

    Returns:
        (the case, the find_orphans row).
    """
    from ilr._effects.orphans import find_orphans

    a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_send"))
    case = env.case(case_id)
    rt.start("refund_signal", case_id, case)
    approve(rt, case_id)
    a.wait(30)
    assert a.returncode == -signal.SIGKILL, workers.log("A")
    assert rt.cancel(case_id, by="ops")
    workers.start("B", lease_ttl=2, env=env.worker_env())
    wait_for(lambda: rt.describe(case_id)["status"] == "cancelled", timeout=30, message="cancelled")

    def settled_orphan():
        rows = [r for r in find_orphans(rt.connection()) if r["dispatch_workflow_id"] == case_id]
        return rows[0] if rows and rows[0]["settled"] else None

    row = wait_for(settled_orphan, timeout=30, message="a settled orphan")
    assert row["wf_status"] == "cancelled" and row["state"] == "dispatched"
    return case, row
