"""S08a (issue 3, late results (f)): the sender's database path is blackholed after its send;
its lease expires, a successor recovers the effect by lookup, and the sender's answer, arriving
after it was fenced out, is appended as LATE_RESULT, never dropped (LateResultPreserved)."""

from __future__ import annotations

import os
import signal

from ilr._journal import receipts
from prove.peers.fault_control import proxy_process
from tests.support.db import proxy_upstream
from tests.support.queries.effects import COUNT_RESPONSES_BY_EFFECT_ID, LATE_RESULT_OF_EFFECTS_BY_EFFECT_ID
from tests.support.queries.journal import KIND_OF_JOURNAL_BY_EFFECT_ID
from tests.support.refund_harness import approve, our_refunds, refund_env
from tests.support.waits import wait_for


def test_s08a_late_response_after_claim_expiry(rt, workers, tmp_path, test_dsn):
    upstream, params = proxy_upstream(test_dsn)
    with refund_env(tmp_path, 2, send_timeout=3.0, settle_margin=3.0) as env, proxy_process(upstream) as proxy:
        env.admin("delay", {"seconds": 2.0})
        url = f"postgresql://{params.get('user', 'postgres')}@127.0.0.1:{proxy.port}/{params['dbname']}"
        a = workers.start(
            "A",
            lease_ttl=2,
            env=env.worker_env(DATABASE_URL=url, ILR_STOP_AT="effect_after_dispatch", ILR_LOG_LEVEL="INFO"),
        )
        case = env.case("s08a")
        rt.start("refund_signal", "s08a", case)
        approve(rt, "s08a")
        workers.wait_state("A", "T")  # T_dispatch committed; no byte sent yet
        proxy.set_mode("blackhole", direction="both")
        os.kill(a.pid, signal.SIGCONT)
        wait_for(lambda: our_refunds(env, case), timeout=20, message="the refund applied")
        workers.start("B", lease_ttl=2, env=env.worker_env())
        result = rt.result("s08a", timeout=60)
        assert result["status"] == "COMMITTED_ON_QUERY"
        proxy.set_mode("pass")
        eff = result["effect_id"]
        wait_for(
            lambda: rt.connection().execute(LATE_RESULT_OF_EFFECTS_BY_EFFECT_ID, (eff,)).fetchone()["late_result"],
            timeout=20,
            message="the late result recorded",
        )
        kinds = [r["kind"] for r in rt.connection().execute(KIND_OF_JOURNAL_BY_EFFECT_ID, (eff,)).fetchall()]
        assert kinds[-2:] == ["COMMITTED", "LATE_RESULT"]
        assert len(our_refunds(env, case)) == 1
        logged = rt.connection().execute(COUNT_RESPONSES_BY_EFFECT_ID, (eff,)).fetchone()["n"]
        assert logged == 1  # the sender logged its answer before trying T_commit
        v = receipts.verify(rt.receipt(eff))
        assert v["chain_intact"] and v["happened"] is True and v["happened_once"] is True
        assert v["assumptions_held"] is True  # the answer came 2 s after the send, inside A2's bound
        assert a.poll() is None
