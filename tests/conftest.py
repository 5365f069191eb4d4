"""Shared fixtures: the test database, a Runtime on it, and real worker subprocesses.

Every integration test runs the real thing: pytest-django creates the test database in the
embedded PostgreSQL (or DATABASE_URL's server) by running the migrations, the ilr tables are
emptied before each test (unmanaged tables are not flushed by Django), and workers are
``manage.py ilr_worker`` subprocesses that this fixture kills at teardown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ILR_TABLES = (
    "ilr.approval_requests, ilr.journal, ilr.effects, ilr.grants, ilr.signals, ilr.llm_calls, ilr.steps, "
    "ilr.claims, ilr.responses, ilr.workflows, ilr.worker_deployments, ilr.deployments"
)


_STARTED_BY_US = pytest.StashKey[bool]()


def _embedded_cluster():
    """The embedded PostgreSQL the settings point at, or None under DATABASE_URL."""
    from django.conf import settings

    from interlock_project.embedded_pg import EmbeddedPostgres

    pgdata = getattr(settings, "ILR_EMBEDDED_PGDATA", None)
    return EmbeddedPostgres(pgdata) if pgdata else None


def pytest_sessionstart(session):
    # Whether the embedded cluster was up before the tests: a cluster this session started is
    # this session's to stop (a fresh clone's test run leaves no postmaster behind); one that
    # was already running (a developer's, a demo's) is left as it was.
    cluster = _embedded_cluster()
    session.config.stash[_STARTED_BY_US] = cluster is not None and not cluster.running()


def pytest_sessionfinish(session):
    cluster = _embedded_cluster()
    if session.config.stash.get(_STARTED_BY_US, False) and cluster is not None and cluster.running():
        from django.db import connections

        connections.close_all()
        cluster.stop()


SLOW_FIXTURES = ("workers", "live_server")
"""A test that starts worker subprocesses or a live server is in the full suite only."""
SLOW_MODULES = (
    "test_demo",
    "test_failover",
    "test_db_restart",
    "test_pgbouncer",
    "test_worker_command",
    "test_agents",
    "test_watchdog",
    "test_commands",
    "test_check_command",
    "test_packaging",
    "test_dbos_baseline",
)
"""Modules whose tests start processes of their own (the demo, clusters, PgBouncer, commands)."""


def pytest_collection_modifyitems(items):
    # Tests that reach the database through our own connections (test_dsn) need pytest-django
    # to create the test database even when no test in the run asks for `db`; the transaction
    # marker makes it so, and never wraps our subprocess-visible writes in a test transaction.
    for item in items:
        if "test_dsn" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.django_db(transaction=True))
        # The quick lane (pytest -m "not slow") is what runs in-process: subprocesses are slow.
        if (
            any(f in getattr(item, "fixturenames", ()) for f in SLOW_FIXTURES)
            or item.module.__name__.rpartition(".")[2] in SLOW_MODULES
        ):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _fresh_signing_key_cache():
    """Each test reads the signing key as it is now. The key is cached per process
    (``ilr._journal.keys.signing_key``), and a test that runs the demo or a Prove sweep may generate one
    under the shared data directory mid-session: a writer still holding the cached "no key" would
    then write unsigned entries that the verifier, which reads the key directory, calls stripped."""
    from ilr._journal import keys

    keys.signing_key.cache_clear()
    yield


@pytest.fixture(scope="session")
def test_dsn(django_db_setup, django_db_blocker):
    """The conninfo of the migrated test database; creates the test-invocations table."""
    from django.conf import settings

    from ilr import _db as db

    assert settings.DATABASES["default"]["NAME"].startswith("test_"), "the tests must not touch a real database"
    with django_db_blocker.unblock():
        dsn = db.conninfo()
        with db.connect(dsn) as conn:
            conn.execute(
                "create table if not exists public.test_invocations ("
                "id bigserial primary key, workflow_id text not null, name text not null, "
                "pid int not null, at timestamptz not null default now())"
            )
    return dsn


@pytest.fixture
def clean_db(test_dsn, django_db_blocker):
    """Empty the ilr tables (and the invocation log) before the test."""
    from ilr import _db as db

    with django_db_blocker.unblock():
        with db.connect(test_dsn) as conn:
            # The append-only triggers refuse DELETE; TRUNCATE is the administrator's reset.
            conn.execute(f"truncate {ILR_TABLES}, public.test_invocations restart identity cascade")
        yield test_dsn


@pytest.fixture
def rt(clean_db, django_db_blocker):
    """A Runtime on the emptied test database."""
    from ilr import Runtime

    with django_db_blocker.unblock():
        runtime = Runtime(clean_db)
        import tests.flows  # noqa: F401 - registers the test workflows in this process

        yield runtime
        runtime.close()


class WorkerProcs:
    """Starts ``manage.py ilr_worker`` subprocesses; kills every one at teardown."""

    def __init__(self, tmp_path: Path):
        self.procs: dict[str, subprocess.Popen] = {}
        self.tmp_path = tmp_path

    def env(self, extra: dict | None = None) -> dict:
        from django.conf import settings

        env = dict(os.environ)
        env["ILR_DB_NAME"] = settings.DATABASES["default"]["NAME"]
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("ILR_KILL_AT", None)
        env.pop("ILR_STOP_AT", None)
        env.update(extra or {})
        return env

    def start(
        self,
        worker_id: str,
        *,
        lease_ttl: float = 2.0,
        poll: float = 0.1,
        concurrency: int = 4,
        env: dict | None = None,
        args: tuple = (),
    ) -> subprocess.Popen:
        log = open(self.tmp_path / f"{worker_id}.log", "ab")
        cmd = [
            sys.executable,
            str(ROOT / "manage.py"),
            "ilr_worker",
            "--id",
            worker_id,
            "--import",
            "tests.flows",
            "--lease-ttl",
            str(lease_ttl),
            "--poll",
            str(poll),
            "--concurrency",
            str(concurrency),
            *args,
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env(env), stdout=log, stderr=subprocess.STDOUT)
        self.procs[worker_id] = proc
        return proc

    def log(self, worker_id: str) -> str:
        return (self.tmp_path / f"{worker_id}.log").read_text(errors="replace")

    def kill(self, worker_id: str) -> None:
        proc = self.procs[worker_id]
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(10)

    def kill_all(self) -> None:
        for worker_id in list(self.procs):
            self.kill(worker_id)

    def wait_state(self, worker_id: str, state: str, timeout: float = 20) -> None:
        """Wait until the process state letter (from /proc) is ``state`` ("T" stopped), or it exits ("X")."""
        proc = self.procs[worker_id]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if state == "X":
                    return
                raise AssertionError(f"{worker_id} exited with {proc.returncode}:\n{self.log(worker_id)}")
            try:
                letter = Path(f"/proc/{proc.pid}/stat").read_text().split(") ", 1)[1][0]
            except FileNotFoundError:
                letter = "X"
            if letter == state:
                return
            time.sleep(0.02)
        raise AssertionError(f"{worker_id} did not reach state {state} in {timeout}s:\n{self.log(worker_id)}")


EVIDENCE: list[dict] = []
"""Ledgers and access logs of the payment targets a test ran (tests.refund_harness adds them)."""


def registry_results(test_dsn: str) -> dict:
    """Run the invariants registry over the test database with this test's evidence."""
    from ilr import _db as db
    from ilr._invariants import check_all

    evidence: dict = {"ledger": [], "access_log": []} if EVIDENCE else {}
    for ev in EVIDENCE:
        evidence["ledger"] += ev["ledger"]
        evidence["access_log"] += ev["access_log"]
    with db.connect(test_dsn) as conn:
        evidence["invocations"] = conn.execute(
            "select workflow_id, name, extract(epoch from at)::float8 as at from public.test_invocations"
        ).fetchall()
        return check_all(conn, evidence)


@pytest.fixture
def workers(rt, tmp_path, request, test_dsn):
    """Worker subprocesses; at teardown every worker is killed and the whole invariants registry
    must hold over what the test did (issue 7), unless the test is marked
    ``allow_violations("Name", ...)`` because it corrupts something on purpose."""
    from ilr._invariants import violations

    EVIDENCE.clear()
    procs = WorkerProcs(tmp_path)
    yield procs
    procs.kill_all()
    allowed = set()
    for mark in request.node.iter_markers("allow_violations"):
        allowed.update(mark.args)
    bad = {k: v for k, v in violations(registry_results(test_dsn)).items() if k not in allowed}
    EVIDENCE.clear()
    assert not bad, f"invariants violated: {bad}"


def failure_of(rt, workflow_id: str, timeout: float = 30.0) -> dict:
    """Wait for ``workflow_id`` to end as failed; return its recorded error (type, message,
    and for InvalidInput the field and rule)."""
    from ilr import WorkflowFailed

    with pytest.raises(WorkflowFailed) as err:
        rt.result(workflow_id, timeout=timeout)
    assert err.value.status == "failed", err.value.error
    return err.value.error


def wait_for(predicate, timeout: float = 20.0, interval: float = 0.05, message: str = "condition"):
    """Poll ``predicate()`` until it returns a truthy value; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
