"""Recovery when the target cannot be read (effects.LOOKUP_RETRY).

A dispatched effect whose sender crashed is resolved by recovery, which re-reads the premises
(and, where the table needs it, looks the effect up) at the target. Before the fix, a target
that refused the connection then ended the workflow failed with the effect left dispatched (an
orphan). Now recovery writes nothing, the workflow waits pending with the attempt and the error
in ``waiting``, and the next attempt, once the target is back, resolves the effect.
"""

from __future__ import annotations

import signal

from prove.demo import free_port
from prove.model_stub import model_stub_process
from prove.target import target_process
from tests.conftest import wait_for
from tests.refund_harness import RefundEnv, approve
from tests.test_effects import our_refunds, total


def test_recovery_waits_out_an_unreachable_target_instead_of_failing(rt, workers, tmp_path):
    port = free_port()
    ledger = tmp_path / "ledger.sqlite"
    with model_stub_process() as model_url:
        with target_process(tier=1, queryable=True, ledger=ledger, port=port) as url:
            env = RefundEnv(url, model_url, 1, True)
            a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_dispatch"))
            case = env.case("lookup-down")
            rt.start("refund", case["id"], case)
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
        effect = rt.connection().execute("select state, sends from ilr.effects where effect_id = %s",
                                         (effect_id,)).fetchone()
        assert effect == {"state": "dispatched", "sends": 1}
        kinds = [r["kind"] for r in rt.connection().execute(
            "select kind from ilr.journal where effect_id = %s order by seq", (effect_id,)).fetchall()]
        assert kinds == ["PROPOSED", "AUTHORIZED", "DISPATCHED"]
        # The target comes back on the same port with the same ledger: the next attempt resends.
        with target_process(tier=1, queryable=True, ledger=ledger, port=port):
            result = rt.result(case["id"], timeout=120)
            assert result["status"] == "COMMITTED_BY_RETRY"
            assert len(our_refunds(env, case)) == 1 and total(env, case) == 2000
