"""Two workflows recovering one dispatched effect (a fork and its original) on real PostgreSQL,
real worker subprocesses and the real HTTP target: the first to take the effect row lock
resends; the other sees the send it made under the same lock and waits, so the effect is resent
once, committed once, and both workflows end."""

from __future__ import annotations

import signal

import pytest

from tests.support.queries.effects import STATE_SENDS_OF_EFFECTS
from tests.support.refund_harness import approve, our_refunds, refund_env


@pytest.mark.parametrize("tier", [1, 2])
def test_a_fork_and_its_original_recover_one_send_once(rt, workers, tmp_path, tier):
    with refund_env(tmp_path, tier) as env:
        w1 = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_send"))
        case = env.case(f"race{tier}")
        rt.start("refund_signal", case["id"], case)
        approve(rt, case["id"])
        w1.wait(30)
        assert w1.returncode == -signal.SIGKILL, workers.log("A")
        # Fork at the effect call: the fork replays the decision and the approval, and reaches
        # the same effect (one key per case), dispatched by the original and unresolved.
        effect_seq = next(s["seq"] for s in rt.describe(case["id"])["steps"] if s["kind"] == "signal") + 1
        rt.fork(case["id"], effect_seq, f"race{tier}-fork")
        env.admin("delay", {"seconds": 0.5})  # the resend's answer takes a moment: the other resolver runs meanwhile
        workers.start("B", lease_ttl=2, concurrency=4, env=env.worker_env())
        original = rt.result(case["id"], timeout=90)
        forked = rt.result(f"race{tier}-fork", timeout=90)
        eff = rt.connection().execute(STATE_SENDS_OF_EFFECTS).fetchall()
        assert eff and all(e["state"] == "committed" for e in eff), eff
        assert len(our_refunds(env, case)) == 1
        assert original["status"] in (
            "COMMITTED_BY_RETRY",
            "COMMITTED_ON_QUERY",
            "REAPPLIED_AFTER_QUERY",
            "DUPLICATE_IGNORED",
        ), original
        assert forked["status"] in (
            "COMMITTED_BY_RETRY",
            "COMMITTED_ON_QUERY",
            "REAPPLIED_AFTER_QUERY",
            "DUPLICATE_IGNORED",
        ), forked
        assert eff[0]["sends"] <= 2, eff  # the first send and at most one resend
