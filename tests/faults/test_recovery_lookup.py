"""Recovery when the target cannot be read (effects.LOOKUP_RETRY).

A dispatched effect whose sender crashed is resolved by recovery, which re-reads the premises
(and, where the table needs it, looks the effect up) at the target. Before the fix, a target
that refused the connection then ended the workflow failed with the effect left dispatched (an
orphan). Now recovery writes nothing, the workflow waits pending with the attempt and the error
in ``waiting``, and the next attempt, once the target is back, resolves the effect.
"""

from __future__ import annotations

import json
import signal

from demo.peers.model_stub import model_stub_process
from demo.peers.target import target_process
from demo.serve import free_port
from tests.support.queries.effects import STATE_SENDS_OF_EFFECTS_BY_EFFECT_ID
from tests.support.queries.journal import COUNT_JOURNAL, KIND_OF_JOURNAL_BY_EFFECT_ID
from tests.support.refund_harness import RefundEnv, approve, our_refunds, total
from tests.support.waits import wait_for


def test_recovery_waits_out_an_unreachable_target_instead_of_failing(rt, workers, tmp_path):
    port = free_port()
    ledger = tmp_path / "ledger.sqlite"
    with model_stub_process() as model_url:
        with target_process(tier=1, queryable=True, ledger=ledger, port=port) as url:
            env = RefundEnv(url, model_url, 1, True)
            a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_dispatch"))
            case = env.case("lookup-down")
            rt.start("refund_signal", case["id"], case)
            approve(rt, case["id"])
            a.wait(30)
            assert a.returncode == -signal.SIGKILL, workers.log("A")
        # The target is down (its port refuses connections): B's recovery cannot re-read the
        # premises. The workflow waits; it does not fail, and nothing is written.
        workers.start("B", lease_ttl=2, env=env.worker_env())

        def lookup_failed():
            d = rt.describe(case["id"])
            assert d["status"] not in ("failed", "stuck", "completed"), d
            w = d["waiting"] or {}
            return d if w.get("lookup_attempt", 0) >= 2 else None

        d = wait_for(lookup_failed, timeout=60, message="two failed lookups recorded in waiting")
        assert d["status"] in ("pending", "running")
        assert "ConnectionRefusedError" in d["waiting"]["lookup_error"]
        effect_id = d["waiting"]["effect_id"]
        effect = rt.connection().execute(STATE_SENDS_OF_EFFECTS_BY_EFFECT_ID, (effect_id,)).fetchone()
        assert effect == {"state": "dispatched", "sends": 1}
        kinds = [r["kind"] for r in rt.connection().execute(KIND_OF_JOURNAL_BY_EFFECT_ID, (effect_id,)).fetchall()]
        assert kinds == ["PROPOSED", "AUTHORIZED", "DISPATCHED"]
        # The target comes back on the same port with the same ledger: the next attempt resends.
        with target_process(tier=1, queryable=True, ledger=ledger, port=port):
            result = rt.result(case["id"], timeout=120)
            assert result["status"] == "COMMITTED_BY_RETRY"
            assert len(our_refunds(env, case)) == 1 and total(env, case) == 2000


def test_a_workflow_that_completes_around_its_dispatched_effect_leaves_an_orphan(rt, workers, tmp_path):
    """A cancel while recovery waits on an unreachable target is delivered at the effect; the
    workflow catches it and completes. Its effect is still dispatched: ilr_check lists it and
    recover_orphans resolves it (before, only stuck, failed and cancelled workflows counted, so
    nothing ever surfaced it)."""
    from demo.workflows import target_for
    from ilr._ops.grants import grant_in
    from tests.support.workers import check

    port = free_port()
    ledger = tmp_path / "ledger.sqlite"
    with rt.connection().transaction():
        grant_id = grant_in(rt.connection(), "refund_catching_cancel", "refund", by="policy", max_cents=10_000)
    with model_stub_process() as model_url:
        with target_process(tier=1, queryable=True, ledger=ledger, port=port) as url:
            env = RefundEnv(url, model_url, 1, True)
            case = {**env.case("catch"), "grant_id": grant_id}
            a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_dispatch"))
            rt.start("refund_catching_cancel", "catch", case)
            a.wait(30)
            assert a.returncode == -signal.SIGKILL, workers.log("A")
        workers.start("B", lease_ttl=2, env=env.worker_env())
        wait_for(
            lambda: (rt.describe("catch")["waiting"] or {}).get("lookup_attempt"), timeout=60, message="a failed lookup"
        )
        rt.cancel("catch", by="test")
        assert rt.result("catch", timeout=60) == "compensated"
        effect_id = rt.describe("catch")["effects"][0]["effect_id"]
        listed = check(workers)
        assert "1 orphaned dispatch(es)" in listed.stdout, listed.stdout
        assert f"{effect_id}  workflow catch (completed), target local-refunds" in listed.stdout
        as_json = check(workers, "--json")
        assert "NoSendAfterCancel" in json.loads(as_json.stdout) and "1 orphaned dispatch(es)" in as_json.stderr
        target = target_for(case)
        assert rt.recover_orphans({target.name: target})[0]["outcome"].startswith("lookup failed, left dispatched")
        with target_process(tier=1, queryable=True, ledger=ledger, port=port):
            assert rt.recover_orphans({target.name: target}) == [
                {"effect_id": effect_id, "workflow_id": "catch", "outcome": "COMMITTED_BY_RETRY"}
            ]
            assert [r["amount"] for r in env.ledger(case["payment"])] == [500]
        assert rt.describe("catch")["status"] == "completed"
        assert "orphaned" not in check(workers).stdout


def test_a_target_down_before_the_first_send_is_waited_out_too(rt, workers, tmp_path):
    """The premises are read before T_dispatch; a target that refuses the connection then
    failed the workflow with the socket's error. Now the workflow waits as recovery does, with
    nothing written (no journal entry), and sends once the target is back."""
    from ilr._ops.grants import grant_in

    port = free_port()
    ledger = tmp_path / "ledger.sqlite"
    with rt.connection().transaction():
        grant_id = grant_in(rt.connection(), "refund_catching_cancel", "refund", by="policy", max_cents=10_000)
    with target_process(tier=1, queryable=True, ledger=ledger, port=port) as url:
        env = RefundEnv(url, "http://127.0.0.1:9", 1, True)
        case = {**env.case("down-first"), "grant_id": grant_id}
    workers.start("A", lease_ttl=2)
    rt.start("refund_catching_cancel", "down-first", case)

    def waiting_twice():
        d = rt.describe("down-first")
        assert d["status"] not in ("failed", "stuck", "completed"), d
        return d if (d["waiting"] or {}).get("lookup_attempt", 0) >= 2 else None

    d = wait_for(waiting_twice, timeout=60, message="two failed premise reads recorded in waiting")
    assert "ConnectionRefusedError" in d["waiting"]["lookup_error"]
    assert rt.connection().execute(COUNT_JOURNAL).fetchone()["n"] == 0
    with target_process(tier=1, queryable=True, ledger=ledger, port=port):
        assert rt.result("down-first", timeout=60) == "COMMITTED"
        assert [r["amount"] for r in env.ledger(case["payment"])] == [500]
