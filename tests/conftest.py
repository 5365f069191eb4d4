"""Shared fixtures: the test database, a Runtime on it, and real worker subprocesses.

Every integration test runs the real thing: pytest-django creates the test database in the
embedded PostgreSQL (or DATABASE_URL's server) by running the migrations, the ilr tables are
emptied before each test (unmanaged tables are not flushed by Django), and workers are
``manage.py ilr_worker`` subprocesses that this fixture kills at teardown.

The tests sit in folders by what they need (support/layout.py): unit/, integration/, faults/ and
browser/; the last two are the ``slow`` ones. What more than one test module uses is in support/.
"""

from __future__ import annotations

import pytest

from tests.support.db import ILR_TABLES, embedded_cluster
from tests.support.layout import SLOW_FOLDERS, folder_of, misplaced
from tests.support.workers import EVIDENCE, WorkerProcs, registry_results

_STARTED_BY_US = pytest.StashKey[bool]()


def pytest_sessionstart(session):
    # Whether the embedded cluster was up before the tests: a cluster this session started is
    # this session's to stop (a fresh clone's test run leaves no postmaster behind); one that
    # was already running (a developer's, a demo's) is left as it was.
    cluster = embedded_cluster()
    session.config.stash[_STARTED_BY_US] = cluster is not None and not cluster.running()


def pytest_sessionfinish(session):
    cluster = embedded_cluster()
    if session.config.stash.get(_STARTED_BY_US, False) and cluster is not None and cluster.running():
        from django.db import connections

        connections.close_all()
        cluster.stop()


def pytest_collection_modifyitems(items):
    # Tests that reach the database through our own connections (test_dsn) need pytest-django
    # to create the test database even when no test in the run asks for `db`; the transaction
    # marker makes it so, and never wraps our subprocess-visible writes in a test transaction.
    wrong = []
    for item in items:
        if "test_dsn" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.django_db(transaction=True))
        # The quick lane (pytest -m "not slow") is what runs in-process: its folder says which.
        if folder_of(item.path) in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
        reason = misplaced(item)
        if reason:
            wrong.append(f"{item.nodeid} {reason}")
    if wrong:
        raise pytest.UsageError("tests in the wrong folder (tests/support/layout.py):\n" + "\n".join(wrong))


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
        import tests.support.flows  # noqa: F401 - registers the test workflows in this process
        import tests.support.flows_flow_control  # noqa: F401
        import tests.support.flows_schedules  # noqa: F401

        yield runtime
        runtime.close()


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


@pytest.fixture
def registered():
    """Register targets in this process's target registry for one test (the review UI and the live
    server re-check premises and read a request's ``amount_field`` through it); restored afterwards."""
    from ilr._effects.targets import _TARGETS, register_target

    saved = dict(_TARGETS)
    yield lambda target: register_target(target, check=False)
    _TARGETS.clear()
    _TARGETS.update(saved)


@pytest.fixture
def alice(rt):
    """A reviewer who may approve and reconcile."""
    from tests.support.review import user

    return user("alice", "approvals.approve", "approvals.reconcile")


@pytest.fixture
def bob(rt):
    """A second reviewer who may approve."""
    from tests.support.review import user

    return user("bob", "approvals.approve")


@pytest.fixture
def signing(tmp_path, settings):
    """A deployment key: written by keys.generate under tmp_path/keys, named by ILR_SIGNING_KEY
    in this process (rt.receipt, rt.reconcile, the receipt page) and passed to workers."""
    from ilr._journal import keys

    private, _ = keys.generate(tmp_path / "keys")
    settings.ILR_SIGNING_KEY = str(private)
    keys.signing_key.cache_clear()
    yield private
    keys.signing_key.cache_clear()
