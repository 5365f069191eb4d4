"""Issue 39's worker gaps, each on real PostgreSQL with real ``manage.py ilr_worker`` subprocesses:

- a database that is down: the claim loop backs off and logs one line when the outage starts and
  one when the database is reachable again, not one per poll;
- a database error that is not a lost connection (a revoked privilege on a table the claim
  writes): logged with its traceback, and the worker claims again once the privilege is back;
- a second live worker with an id a live worker holds refuses to start, naming the id; a worker
  whose predecessor with that id died starts;
- a DATABASES entry that is not PostgreSQL: refused at start with the system check's sentence,
  and no SQLite file is created.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import psycopg
import pytest

from ilr import _db as db
from tests.support import ROOT
from tests.support.db import embedded_cluster_or_skip
from tests.support.queries.claims import OWNER_OF_CLAIMS_BY_WORKFLOW_ID_AFTER_GRANT
from tests.support.queries.deployments import SEED_WORKER_DEPLOYMENTS_GHOST
from tests.support.waits import wait_for


def started(workers, worker_id: str, n: int = 1) -> bool:
    """The worker's startup line was printed ``n`` times (once per process with this id)."""
    return workers.log(worker_id).count(f"ilr_worker {worker_id}: running ") >= n


def worker_popen(env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "ilr_worker", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def exited(proc: subprocess.Popen, timeout: float = 45) -> tuple[int, str, str]:
    """Wait for ``proc`` to exit on its own (a worker that started instead is killed, and fails
    the test); return its exit code, stdout and stderr."""
    try:
        wait_for(lambda: proc.poll() is not None, timeout=timeout, message="the worker to refuse and exit")
    finally:
        if proc.poll() is None:
            proc.kill()
    out, err = proc.communicate(timeout=10)
    return proc.returncode, out, err


# -- 1. the claim loop and database errors -----------------------------------------------------


def test_database_outage_is_one_line_and_one_on_recovery(rt, workers):
    """The database stopped for 3 s under an idle worker polling every 0.1 s: the claim loop said
    so in one line (it used to log every poll, ~30 lines), the listen loop in one, and one line
    once the database was reachable again; then the worker claims and runs a workflow."""
    cluster = embedded_cluster_or_skip()
    proc = workers.start("out", lease_ttl=2, poll=0.1)
    wait_for(lambda: started(workers, "out"), timeout=60, message="the startup line")
    # The startup line comes before the worker opens its run connections: wait for its LISTEN
    # statement, issued once they are open, so that the outage meets a running claim loop, not a
    # worker still starting (which exits on a failed connect: this test failed so, 1 run in 4).
    wait_for(
        lambda: (
            rt.connection()
            .execute(
                "select count(*) as n from pg_stat_activity where application_name = 'ilr-worker-out-listen' "
                "and query ilike 'listen%%'"
            )
            .fetchone()["n"]
            == 1
        ),
        timeout=30,
        message="the worker's LISTEN connection",
    )
    rt.close()
    from django.db import connections

    connections.close_all()
    cluster.stop()
    try:
        wait_for(lambda: "claim failed" in workers.log("out"), timeout=10, message="the outage line")
        down_until = time.monotonic() + 3.0
        wait_for(lambda: time.monotonic() >= down_until, timeout=10, message="3 s of outage")
    finally:
        cluster.start()
    wait_for(lambda: "database reachable again after" in workers.log("out"), timeout=20, message="the recovery line")
    rt.start("three_steps", "after-outage", {})
    assert rt.result("after-outage", timeout=30)["counts"]
    assert proc.poll() is None
    log = workers.log("out")
    assert log.count("claim failed") == 1, log
    assert log.count("listen connection failed") == 1, log
    assert log.count("database reachable again after") == 1, log
    assert "Traceback" not in log, log


ROLE = "ilr_test_claimer"
"""A role without superuser's bypass of privileges: the worker's sessions take it at connect
(PGOPTIONS -c role=...), so a revoked privilege reaches exactly the worker."""


def test_error_that_is_not_a_lost_connection_is_logged_and_claims_go_on(rt, workers, test_dsn):
    """INSERT on ilr.claims revoked from the worker's role: every claim fails with
    InsufficientPrivilege (not a connection fault). The worker logs it with its traceback, backs
    off and keeps trying (it used to leave its claim loop and exit); granted again, it claims."""
    with db.connect(test_dsn) as admin:
        admin.execute(f"drop role if exists {ROLE}")
        admin.execute(f"create role {ROLE} nologin")
        for schema in ("ilr", "public"):
            admin.execute(f"grant usage on schema {schema} to {ROLE}")
            admin.execute(f"grant all on all tables in schema {schema} to {ROLE}")
            admin.execute(f"grant all on all sequences in schema {schema} to {ROLE}")
            admin.execute(f"grant execute on all functions in schema {schema} to {ROLE}")
    try:
        proc = workers.start("perm", env={"PGOPTIONS": f"-c role={ROLE}"})
        wait_for(lambda: started(workers, "perm"), timeout=60, message="the startup line")
        with db.connect(test_dsn) as admin:
            admin.execute(f"revoke insert on ilr.claims from {ROLE}")
        rt.start("three_steps", "after-grant", {})
        wait_for(
            lambda: workers.log("perm").count("permission denied for table claims") >= 3 or proc.poll() is not None,
            timeout=30,
            message="three failed claims logged",
        )
        assert proc.poll() is None, f"the worker exited with {proc.returncode}:\n{workers.log('perm')}"
        with db.connect(test_dsn) as admin:
            admin.execute(f"grant insert on ilr.claims to {ROLE}")
        assert rt.result("after-grant", timeout=30)["counts"]
        assert proc.poll() is None
        log = workers.log("perm")
        assert "Traceback" in log and "InsufficientPrivilege" in log, log
        claimer = rt.connection().execute(OWNER_OF_CLAIMS_BY_WORKFLOW_ID_AFTER_GRANT).fetchall()
        assert [c["owner"] for c in claimer] == ["perm"]
    finally:
        workers.kill_all()
        with db.connect(test_dsn) as admin:
            admin.execute(f"drop owned by {ROLE}")
            admin.execute(f"drop role {ROLE}")


# -- 2. one live worker per id -----------------------------------------------------------------


def test_second_live_worker_with_a_taken_id_refuses_and_a_dead_ones_id_restarts(rt, workers):
    workers.start("dup")
    wait_for(lambda: started(workers, "dup"), timeout=60, message="the first worker's startup line")
    code, out, err = exited(worker_popen(workers.env(), "--id", "dup", "--import", "tests.support.flows"))
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "'dup'" in lines[0] and "already" in lines[0], lines[0]
    assert "running" not in out
    # The first worker is untouched and still runs workflows.
    rt.start("three_steps", "dup-1", {})
    assert rt.result("dup-1", timeout=30)["counts"]
    # Its process dies (SIGKILL: no clean exit, its worker_deployments rows are still live):
    # a worker with its id starts.
    workers.kill("dup")
    workers.start("dup")
    wait_for(lambda: started(workers, "dup", 2), timeout=60, message="the restarted worker's startup line")
    rt.start("three_steps", "dup-2", {})
    assert rt.result("dup-2", timeout=30)["counts"]


def test_a_dead_workers_lingering_session_does_not_keep_its_id(rt, workers, test_dsn):
    """A worker whose host died leaves its session open on the server (until TCP keepalive) and
    its worker_deployments rows stale: the id's lock is held but nothing refreshes the rows. A
    new worker with the id ends that session and starts."""
    from ilr._queries.deployments import WORKER_ID_LOCK_SQL

    rt.start("three_steps", "ghost-1", {})  # deploys three_steps@1, which the rows reference
    ghost = db.connect(test_dsn)
    try:
        assert ghost.execute(WORKER_ID_LOCK_SQL, {"worker": "ghost"}).fetchone()["taken"]
        ghost.execute(SEED_WORKER_DEPLOYMENTS_GHOST)
        workers.start("ghost")
        wait_for(lambda: started(workers, "ghost"), timeout=60, message="the startup line")
        assert rt.result("ghost-1", timeout=30)["counts"]
        with pytest.raises(psycopg.OperationalError):  # its session was terminated
            ghost.execute("select 1")
        assert "ended the session" in workers.log("ghost"), workers.log("ghost")
    finally:
        db.discard(ghost)


# -- 3. not PostgreSQL --------------------------------------------------------------------------


def test_sqlite_is_refused_with_the_checks_sentence_and_no_file_is_made(tmp_path):
    path = tmp_path / "x.sqlite3"
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{path}", PYTHONUNBUFFERED="1")
    env.pop("ILR_DB_NAME", None)  # the test workers' override would rename the SQLite file
    code, out, err = exited(worker_popen(env, "--id", "w1", "--import", "tests.support.flows"))
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "ilr needs PostgreSQL 15 or newer; DATABASES['default'] is sqlite (django.db.backends.sqlite3)." in lines[0]
    assert "migrations are pending" not in err
    assert not path.exists()
