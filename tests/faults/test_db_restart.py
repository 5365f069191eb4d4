"""A database restart under a running worker (real PostgreSQL stopped fast and started again,
a real worker subprocess): every workflow progresses within one lease of the server accepting
connections again, and the restart never counts as a takeover toward the crash-loop guard."""

from __future__ import annotations

import time

from tests.support.db import embedded_cluster_or_skip
from tests.support.queries.claims import EPOCH_OWNER_PREV_STATUS_OF_CLAIMS_BY_WORKFLOW_ID
from tests.support.queries.effects import ANY_EFFECTS_BY_STATE
from tests.support.waits import wait_for

LEASE_TTL = 5.0


def claims(rt, wf_id):
    return rt.connection().execute(EPOCH_OWNER_PREV_STATUS_OF_CLAIMS_BY_WORKFLOW_ID, (wf_id,)).fetchall()


def test_database_restart_costs_no_takeover_and_at_most_one_lease(rt, workers, tmp_path):
    """--concurrency 8 --lease-ttl 5: one workflow sleeps on a signal, one is inside a step body,
    while the database stops (fast) and starts. Signalled after the restart, the first is claimed
    onto the worker's pooled connections, every one of which died in the restart; the second
    records its step on a connection that died under it. Both complete within one lease of the
    server accepting connections, and no claim of either counts as a takeover."""
    cluster = embedded_cluster_or_skip()
    workers.start("w1", lease_ttl=LEASE_TTL, concurrency=8, poll=0.5, env={"ILR_LOG_LEVEL": "INFO"})
    gate = tmp_path / "gate"
    rt.start("waiter", "sig", {})
    rt.start("gated", "inflight", {"path": str(gate)})
    wait_for(lambda: rt.describe("sig")["status"] == "sleeping", message="the waiter sleeps on its signal")
    wait_for(lambda: rt.describe("inflight")["status"] == "running", message="the gated step body is running")
    rt.close()
    from django.db import connections

    connections.close_all()

    cluster.stop()  # pg_ctl stop -m fast: every backend is terminated, the worker's included
    cluster.start()  # returns once the server accepts connections
    up = time.monotonic()
    rt.signal("sig", "approve", {"n": 1})
    gate.touch()  # the in-flight step body returns now and records on its (dead) connection

    done: dict[str, float] = {}

    def progressed():
        for wf_id in ("sig", "inflight"):
            if wf_id not in done:
                status = rt.describe(wf_id)["status"]
                assert status != "stuck", rt.describe(wf_id)["error"]
                if status == "completed":
                    done[wf_id] = time.monotonic() - up
        return len(done) == 2

    try:
        wait_for(
            progressed,
            timeout=LEASE_TTL + 1.0,
            interval=0.02,
            message="both workflows completed within one lease of the restart",
        )
    finally:
        print(
            f"\nrecovery after the database accepted connections again: "
            f"{ {k: round(v, 3) for k, v in done.items()} } s (lease {LEASE_TTL} s)"
        )
    assert rt.result("sig", timeout=1) == {"payload": {"n": 1}}
    assert rt.result("inflight", timeout=1) == str(gate)
    for wf_id in ("sig", "inflight"):
        history = claims(rt, wf_id)
        assert [c["prev_status"] for c in history if c["prev_status"] == "running"] == [], history
        assert rt.describe(wf_id)["takeovers"] == 0
    log = workers.log("w1")
    # Neither run met a dead connection: the claimed run took a live one from the pool, and the
    # in-flight run's context replaced its dead one before recording.
    assert "database error in" not in log, log
    assert "Traceback" not in log, log
    assert workers.procs["w1"].poll() is None, log


def test_run_abandoned_while_the_database_is_down_past_its_lease_is_released_not_taken_over(rt, workers, tmp_path):
    """The step body ends while the database is down, so the run cannot record and is abandoned;
    the database stays down past the lease, then starts. The worker releases its claim before its
    next claim: the workflow completes within one lease of the restart, and the claim that takes
    it again counts no takeover (prev_status 'pending', takeovers 0)."""
    cluster = embedded_cluster_or_skip()
    workers.start("w1", lease_ttl=LEASE_TTL, concurrency=8, poll=0.5, env={"ILR_LOG_LEVEL": "INFO"})
    gate = tmp_path / "gate"
    rt.start("gated", "down", {"path": str(gate)})
    wait_for(lambda: rt.describe("down")["status"] == "running", message="the gated step body is running")
    rt.close()
    from django.db import connections

    connections.close_all()

    cluster.stop()
    stopped = time.monotonic()  # every renewal of the lease committed before this
    gate.touch()
    wait_for(
        lambda: "database error in down" in workers.log("w1"),
        timeout=10,
        message="the run meets the stopped database and is abandoned",
    )
    # The lease is a deadline: wait for it to pass while the server is down (plus a margin for
    # the database clock), so the row the restart finds has a lapsed lease.
    wait_for(
        lambda: time.monotonic() >= stopped + LEASE_TTL + 0.5,
        timeout=LEASE_TTL + 5,
        message="the lease lapsed while the database was down",
    )
    cluster.start()
    up = time.monotonic()
    wait_for(
        lambda: rt.describe("down")["status"] == "completed",
        timeout=LEASE_TTL,
        interval=0.02,
        message="the workflow completes within one lease of the restart",
    )
    recovery = time.monotonic() - up
    print(f"\nrecovery after the database accepted connections again: {recovery:.3f} s (lease {LEASE_TTL} s)")
    history = claims(rt, "down")
    assert [c["prev_status"] for c in history] == ["pending", "pending"], history
    assert rt.describe("down")["takeovers"] == 0
    log = workers.log("w1")
    assert "released down (epoch 1) after a database fault" in log, log
    assert "Traceback" not in log, log


def test_database_restart_during_a_send_commits_the_answer(rt, workers, tmp_path, test_dsn):
    """The database restarts while a gated effect's send is in flight (the target holds it 3 s).
    The answer comes back to a worker whose run connection died: T_commit runs on a fresh
    connection (the fence is the row's epoch and lease, not the session), so the effect commits
    once and the workflow completes, neither failed nor orphaned."""
    from ilr import _db as db
    from ilr._journal import receipts
    from tests.support.refund_harness import refund_env

    cluster = embedded_cluster_or_skip()
    amount_file = tmp_path / "amount"
    amount_file.write_text("500")
    with refund_env(tmp_path, tier=2, send_timeout=20.0) as env:
        grant = rt.grant("agent", "refund", max_cents=1000, by="ops")
        case = env.case("restart-send", amount_file=str(amount_file), grant_id=grant)
        env.admin("delay", {"seconds": 3})
        workers.start("w1", lease_ttl=10, env=env.worker_env())
        rt.start("live_amount", case["id"], case)

        def dispatched():
            with db.connect(test_dsn) as conn:
                return conn.execute(ANY_EFFECTS_BY_STATE).fetchone()

        wait_for(dispatched, timeout=30, message="the effect dispatched")
        rt.close()
        from django.db import connections

        connections.close_all()
        cluster.stop()
        cluster.start()
        out = rt.result(case["id"], timeout=60)
        assert out["status"] == "COMMITTED", rt.describe(case["id"])
        assert [r["amount"] for r in env.ledger(case["payment"])] == [500]
        assert receipts.verify(rt.receipt(out["effect_id"]))["happened_once"] is True
