"""Worker faults against real PostgreSQL and real worker subprocesses: a heartbeat that stalls
on a row lock until the lease lapses, and a database that turns read-only for a while."""

from __future__ import annotations

import time

from ilr import _db as db
from tests.support.db import invocations
from tests.support.queries.claims import EPOCH_OWNER_OF_CLAIMS_BY_WORKFLOW_ID
from tests.support.queries.workflows import LOCK_WAITERS_ON_WORKFLOWS, LOCK_WORKFLOWS_BY_ID_LAPSE
from tests.support.waits import wait_for


def claims(rt, wf_id):
    return rt.connection().execute(EPOCH_OWNER_OF_CLAIMS_BY_WORKFLOW_ID, (wf_id,)).fetchall()


def stalled_heartbeat_renews_a_lapsed_lease(rt, worker_id: str, wf_id: str, ttl: float) -> bool:
    """The worker's heartbeat UPDATE waits on a row lock, and even once it gets through, the lease
    it writes (its own transaction's now() + ttl) is already in the past."""
    return (
        rt.connection()
        .execute(
            LOCK_WAITERS_ON_WORKFLOWS,
            (f"ilr-worker-{worker_id}-heartbeat", wf_id, ttl),
        )
        .fetchone()["n"]
        > 0
    )


def test_own_lapsed_workflow_taken_back_runs_to_the_end(rt, workers, test_dsn):
    """The heartbeat stalls until the lease lapses and the same worker claims the workflow again
    while epoch 1 is still inside its step: epoch 1 is fenced, epoch 2 runs to the end."""
    workers.start("w1", lease_ttl=2, env={"ILR_LOG_LEVEL": "INFO"})
    rt.start("slow", "lapse", {"seconds": 6})
    wait_for(lambda: invocations(rt, "lapse", "nap") == 1, message="epoch 1 inside its 6 s step")
    # The step body sleeps in Python, so the only writer on the row now is the heartbeat: a row
    # lock held here stalls exactly its UPDATE (the claim skips the locked row). Held until the
    # stalled UPDATE's own now() + ttl has passed: released earlier, the UPDATE, whose now() is
    # from before the lapse, would still renew the lease and nothing would be taken over.
    with db.connect(test_dsn) as blocker:
        with blocker.transaction():
            blocker.execute(LOCK_WORKFLOWS_BY_ID_LAPSE)
            wait_for(
                lambda: stalled_heartbeat_renews_a_lapsed_lease(rt, "w1", "lapse", 2),
                timeout=10,
                message="the heartbeat stalled on the row lock past the lease",
            )
    wait_for(lambda: len(claims(rt, "lapse")) >= 2, timeout=10, message="the worker claims its own lapsed workflow")
    assert rt.result("lapse", timeout=30) == 6
    assert [(c["epoch"], c["owner"]) for c in claims(rt, "lapse")] == [(1, "w1"), (2, "w1")]
    assert invocations(rt, "lapse", "nap") == 2  # epoch 1's body (fenced) and epoch 2's
    steps = rt.describe("lapse")["steps"]
    assert [(s["name"], s["epoch"]) for s in steps] == [("nap", 2)]
    wait_for(lambda: "fenced out of lapse (epoch 1)" in workers.log("w1"), message="epoch 1 reports it was fenced")


def show_read_only(conn) -> bool:
    return conn.execute("show transaction_read_only").fetchone()["transaction_read_only"] == "on"


def test_read_only_database_is_a_lost_connection(rt, workers, test_dsn):
    """Every write refused as read-only (SQLSTATE 25006) for 6 s while a run records its step and
    the worker heartbeats and claims: the worker logs it and lives, the workflow completes."""
    proc = workers.start("ro", lease_ttl=2, env={"ILR_LOG_LEVEL": "INFO"})
    rt.start("slow", "ro1", {"seconds": 3})
    wait_for(lambda: invocations(rt, "ro1", "nap") == 1, message="the run inside its step")
    # The admin session pins itself read-write, so it can always undo the setting; the probe
    # follows the server's default, as the worker's sessions do.
    admin = db.connect(test_dsn, options="-c default_transaction_read_only=off")
    probe = db.connect(test_dsn)
    try:
        admin.execute("alter system set default_transaction_read_only = on")
        admin.execute("select pg_reload_conf()")
        wait_for(lambda: show_read_only(probe), timeout=10, message="new transactions are read only")
        # The 3 s step ends inside this window, so its record meets the read-only database too.
        hold_until = time.monotonic() + 6.0
        wait_for(
            lambda: proc.poll() is not None or time.monotonic() >= hold_until,
            timeout=10,
            message="the read-only window",
        )
    finally:
        admin.execute("alter system reset default_transaction_read_only")
        admin.execute("select pg_reload_conf()")
        wait_for(lambda: not show_read_only(probe), timeout=10, message="the database writable again")
        admin.close()
        probe.close()
    assert proc.poll() is None, f"the worker exited with {proc.returncode}:\n{workers.log('ro')}"
    assert rt.result("ro1", timeout=30) == 3
    log = workers.log("ro")
    # Each path met the read-only server and carried on: the heartbeat, the claim loop, and the
    # run, whose step record was refused (it gave up the claim; a takeover completed it).
    for line in (
        "heartbeat failed (cannot execute UPDATE in a read-only transaction)",
        "claim failed (cannot execute SELECT FOR UPDATE in a read-only transaction); retrying",
        "in a read-only transaction); abandoning the run",
    ):
        assert line in log, log
    assert "Traceback" not in log, log
    assert rt.describe("ro1")["status"] == "completed"
