"""Orphan recovery leaves an ended workflow ended (ilr.orphans).

A sweep resolves an effect left dispatched under a workflow that ended. Its synthetic claim
bumps the epoch with owner $recovery and never changes the workflow's status: the workflow
takes no signal, no worker can claim it, and a sweep acts only on what is still an orphan when
it locks it. Each test makes a real orphan: a worker SIGKILLed right after the target applied
the refund, a cancel, and a second worker that delivers the Cancelled at the effect.
"""

from __future__ import annotations

import threading

import pytest

from demo.workflows import target_for
from ilr import InvalidInput
from ilr import _db as db
from ilr._effects import orphans
from ilr._effects.orphans import find_orphans, recover_orphans
from tests.support.queries.claims import EPOCH_OWNER_PREV_STATUS_ETC_OF_CLAIMS_BY_WORKFLOW_ID
from tests.support.queries.workflows import STATUS_OWNER_EPOCH_ETC_OF_WORKFLOWS_BY_ID
from tests.support.refund_harness import cancelled_orphan, refund_env
from tests.support.waits import wait_for


class GatedLookup:
    """A real target whose lookup waits until the test opens the gate, then asks the target."""

    def __init__(self, inner):
        self._inner = inner
        self.entered = threading.Event()
        self.gate = threading.Event()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def query(self, effect_id, payload):
        self.entered.set()
        if not self.gate.wait(120):
            raise TimeoutError("the test never opened the gate")
        return self._inner.query(effect_id, payload)


def workflow_row(rt, wf_id: str) -> dict:
    return rt.connection().execute(STATUS_OWNER_EPOCH_ETC_OF_WORKFLOWS_BY_ID, (wf_id,)).fetchone()


def claims_of(rt, wf_id: str) -> list[dict]:
    return (
        rt.connection()
        .execute(
            EPOCH_OWNER_PREV_STATUS_ETC_OF_CLAIMS_BY_WORKFLOW_ID,
            (wf_id,),
        )
        .fetchall()
    )


def test_a_sweep_on_a_slow_lookup_leaves_the_cancelled_workflow_ended_and_unclaimable(rt, workers, tmp_path, test_dsn):
    """The sweep's lease is 1 s and its lookup outlasts it by seconds. Meanwhile the workflow
    reads cancelled, a signal to it is refused, worker B (serving refund, polling every 0.1 s)
    never claims it, a second sweep reports the first one's claim and bumps nothing, and the
    sweep still resolves the effect by its lookup."""
    with refund_env(tmp_path, 2) as env:
        case, orphan = cancelled_orphan(rt, workers, env, "ended-slow")
        wf_id = case["id"]
        target = GatedLookup(target_for(case))
        out: dict = {}
        sweep = threading.Thread(
            target=lambda: out.update(report=recover_orphans(test_dsn, {target.name: target}, lease_ttl=1.0)),
            daemon=True,
        )
        sweep.start()
        try:
            assert target.entered.wait(30), "the sweep never reached its lookup"
            wf = workflow_row(rt, wf_id)
            assert wf["status"] == "cancelled", wf
            assert wf["owner"] == "$recovery", wf
            with pytest.raises(InvalidInput) as err:
                rt.signal(wf_id, "approve", {"late": True})
            assert "cancelled" in err.value.rule
            assert not rt.cancel(wf_id, by="ops")
            assert [r["id"] for r in rt.list(status="cancelled")] == [wf_id] and rt.list(status="running") == []
            assert [d["active"] for d in rt.drain_report(name="refund_signal")] == [0]
            claim = claims_of(rt, wf_id)[-1]
            assert (claim["owner"], claim["prev_status"], claim["epoch"]) == ("$recovery", "cancelled", wf["epoch"])
            # The lease the claim first took lapses; B polls about 20 times past it.
            wait_for(
                lambda: (
                    rt.connection()
                    .execute("select now() > %s + interval '2 s' as past", (claim["lease_expires_at"],))
                    .fetchone()["past"]
                ),
                timeout=30,
                message="the sweep's first lease two seconds past",
            )
            assert workers.procs["B"].poll() is None, workers.log("B")
            assert claims_of(rt, wf_id)[-1]["epoch"] == claim["epoch"], "a worker claimed the ended workflow"
            wf = workflow_row(rt, wf_id)
            assert wf["status"] == "cancelled" and wf["epoch"] == claim["epoch"], wf
            # The sweep's heartbeat kept its lease live past the first one.
            assert wf["lease_expires_at"] > claim["lease_expires_at"], wf
            # A second sweep finds the orphan but does not fence the first one.
            plain = target_for(case)
            assert recover_orphans(test_dsn, {plain.name: plain}, lease_ttl=1.0) == [
                {"effect_id": orphan["effect_id"], "workflow_id": wf_id, "outcome": "another sweep holds it"}
            ]
            assert claims_of(rt, wf_id)[-1]["epoch"] == claim["epoch"]
            assert workflow_row(rt, wf_id)["epoch"] == claim["epoch"]
        finally:
            target.gate.set()
            sweep.join(60)
        assert not sweep.is_alive()
        assert out["report"] == [
            {"effect_id": orphan["effect_id"], "workflow_id": wf_id, "outcome": "COMMITTED_ON_QUERY"}
        ]
        wf = workflow_row(rt, wf_id)
        assert (wf["status"], wf["owner"], wf["lease_expires_at"], wf["epoch"]) == (
            "cancelled",
            None,
            None,
            claim["epoch"],
        )
        assert [c["owner"] for c in claims_of(rt, wf_id)][-1] == "$recovery"
        assert rt.describe(wf_id)["effects"][0]["state"] == "committed"
        assert find_orphans(rt.connection()) == []
        assert len([r for r in env.ledger(case["payment"]) if r["source"] == "api"]) == 1


def test_a_sweep_from_a_stale_list_writes_no_claim_and_bumps_no_epoch(rt, workers, tmp_path, test_dsn):
    """A sweep lists the orphan, another sweep resolves it, then the first acts on its old row:
    it writes no claim, bumps no epoch, and changes nothing."""
    with refund_env(tmp_path, 2) as env:
        case, _ = cancelled_orphan(rt, workers, env, "ended-stale")
        wf_id = case["id"]
        target = target_for(case)
        with db.connect(test_dsn) as conn:
            stale = find_orphans(conn)
            assert [r["dispatch_workflow_id"] for r in stale] == [wf_id]
            assert recover_orphans(test_dsn, {target.name: target}) == [
                {"effect_id": stale[0]["effect_id"], "workflow_id": wf_id, "outcome": "COMMITTED_ON_QUERY"}
            ]
            before_claims, before_wf = claims_of(rt, wf_id), workflow_row(rt, wf_id)
            assert orphans._recover_one(conn, stale[0], target, 1.0) == "resolved meanwhile"
        assert claims_of(rt, wf_id) == before_claims
        assert workflow_row(rt, wf_id) == before_wf
        assert before_wf["status"] == "cancelled" and before_wf["owner"] is None
        assert rt.describe(wf_id)["effects"][0]["state"] == "committed"
        assert len([r for r in env.ledger(case["payment"]) if r["source"] == "api"]) == 1
