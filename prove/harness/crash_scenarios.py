"""The drivers of the crash and outage scenarios (S01 to S06, S05L, S09, S10, S11; the table is
prove/harness/scenarios.py): the workers are killed (at a kill point, or all of them during an
outage), something happens while they are down (a hand refund, a revoke, a pruned key, a
re-decision, an approval), and they restart. Each ``d_*(run, s)`` acts on one system ``s``
(prove.peers.systems) through real signals and real HTTP admin calls, and returns the system's own
reported outcome."""

from __future__ import annotations

import time


def crash_recover(run, s, point, outage=None, kill_workers=1):
    for _ in range(kill_workers):
        s.start_worker(kill_at=point)
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    s.wait_killed()
    s.down()
    if outage:
        outage(run, s)
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def hand_refund(amount):
    def outage(run, s):
        run.target_admin("hand_refund", {"payment": run.payment, "amount": amount})
        run.hand_at = time.time()
        run.fault("hand_refund", amount=amount)

    return outage


def revoke_outage(run, s):
    run.revoke_returned = s.revoke()
    run.revoke_at = time.time()


def d_s01(run, s):
    return crash_recover(run, s, "effect_after_send")


def d_s02(run, s):
    return crash_recover(run, s, "effect_after_dispatch", hand_refund(2000))


def d_s03(run, s):
    return crash_recover(run, s, "effect_after_dispatch", revoke_outage)


def d_s06(run, s):
    return crash_recover(run, s, "effect_after_dispatch", hand_refund(1000))


def d_s09(run, s):
    return crash_recover(run, s, "effect_after_dispatch" if run.variant == "pre" else "effect_after_send")


def d_s04(run, s):
    def outage(run, s):
        # Real age: wait until dedup_window - DEDUP_MARGIN (612 - 600 = 12 s) has passed since
        # the first dispatch (the approval is a lower bound of it), then prune (EMULATED expiry).
        wait = run.approved_at + 12.0 + 1.0 - time.time()
        if wait > 0:
            time.sleep(wait)
        run.target_admin("prune_keys", {})
        run.fault("prune_keys")

    return crash_recover(run, s, "effect_after_send", outage)


def d_s05(run, s):
    run.model_admin("script", {"redecide": True})
    s.start_worker(kill_at="effect_after_send")
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    s.wait_killed()
    s.down()
    if s.name in ("runtime", "dbos"):
        # Both fork from the decision: the runtime with rt.fork, DBOS with fork_workflow.
        fork_id = s.fork_at_decide(run.case_id + "-fork")
        run.mark_restart()
        s.start_worker()
        proposal = s.wait_proposal(wf_id=fork_id)
        # The person approves what the fork now proposes (3000): the strongest test of payload
        # binding, since the grant itself would allow it.
        s.approve(wf_id=fork_id, payload=proposal)
        original = s.result(timeout=run.result_timeout)
        forked = s.result(timeout=run.result_timeout, wf_id=fork_id)
        return {"status": forked["status"], "original": original, "fork": forked}
    s.reset_to_decide()
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def d_s05b(run, s):
    run.model_admin("script", {"redecide": True})
    s.start_worker(kill_at="decide_after_response")
    run.start_case(s)
    s.wait_killed()
    s.down()
    run.mark_restart()
    s.start_worker()
    proposal = s.wait_proposal()
    # The person approves the amount the first (discarded) decision showed: 2000, while the
    # re-called model now proposes 3000.
    s.approve(payload={"payment": run.payment, "amount": 2000})
    out = s.result(timeout=run.result_timeout)
    out["proposed_after_recall"] = proposal["amount"]
    return out


def d_s05l(run, s):
    s.start_worker(kill_at="decide_after_response")
    run.start_case(s)
    s.wait_killed()
    s.down()
    s.start_worker(kill_at="effect_after_send")
    s.wait_proposal()
    s.approve()
    s.wait_killed()
    s.down()
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def d_s10(run, s):
    s.start_worker()
    run.start_case(s, sleep_before_effect=20)
    s.wait_proposal()
    s.approve()
    t0 = time.monotonic()
    time.sleep(max(0.0, t0 + 5 - time.monotonic()))
    s.down()
    time.sleep(max(0.0, t0 + 8 - time.monotonic()))
    run.crash_store(s)
    time.sleep(max(0.0, t0 + 25 - time.monotonic()))
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def d_s11(run, s):
    s.start_worker()
    run.start_case(s)
    s.wait_proposal()
    t0 = time.monotonic()
    time.sleep(2)
    s.down()
    time.sleep(max(0.0, t0 + 4 - time.monotonic()))
    s.approve()
    time.sleep(max(0.0, t0 + 6 - time.monotonic()))
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)
