"""The Django app and the workers through a real PgBouncer (Debian's package), in session and in
transaction mode, in front of the test database.

Session mode: everything works, a refund with a model decision, steps, an approval signal and a
gated effect included. Transaction mode: the client side (Runtime, the Django ORM, signal_in in
Django's transaction) works; a worker that declares ILR_POOLER=transaction refuses at start in one
sentence, because it needs LISTEN and per-connection prepared statements.

Skipped only when pgbouncer is not installed and CI is unset (.ci/run installs it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from ilr import Runtime
from ilr._journal import receipts
from tests.support import ROOT
from tests.support.queries.deployments import COUNT_WORKER_DEPLOYMENTS
from tests.support.refund_harness import approve, refund_env
from tests.support.waits import wait_for


def _pgbouncer_binary() -> str:
    found = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("pgbouncer is not installed, and CI must run these tests (.ci/run installs it)")
    pytest.skip("pgbouncer is not installed (apt-get install pgbouncer); CI installs it")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgBouncer:
    """One pgbouncer process in the foreground, its ini and log in a directory of its own."""

    def __init__(self, binary: str, mode: str):
        from django.conf import settings

        db = settings.DATABASES["default"]
        self.mode = mode
        self.dbname = db["NAME"]
        self.backend_host = db.get("HOST") or "/var/run/postgresql"
        self.backend_port = str(db.get("PORT") or 5432)
        self.user = db.get("USER") or "postgres"
        self.port = _free_port()
        self.dir = Path(tempfile.mkdtemp(prefix=f"ilr-pgb-{mode}-"))
        self.run_as = self._run_as()
        self.ini = self.dir / "pgbouncer.ini"
        (self.dir / "userlist.txt").write_text(f'"{self.user}" ""\n')
        self.ini.write_text(
            "[databases]\n"
            f"* = host={self.backend_host} port={self.backend_port}\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\n"
            "unix_socket_dir =\n"  # TCP only: no socket file in /tmp to clash with anything
            f"auth_type = trust\nauth_file = {self.dir / 'userlist.txt'}\n"
            f"admin_users = {self.user}\n"
            f"pool_mode = {mode}\n"
            "max_client_conn = 200\ndefault_pool_size = 40\n"
        )
        if self.run_as is not None:
            for path in (self.dir, self.ini, self.dir / "userlist.txt"):
                os.chown(path, self.run_as, -1)
        self.log = self.dir / "pgbouncer.log"
        self._log = open(self.log, "ab")  # noqa: SIM115 - lives as long as the process writing it
        self.proc = subprocess.Popen(
            [binary, str(self.ini)], stdout=self._log, stderr=subprocess.STDOUT, user=self.run_as
        )
        wait_for(self._accepts, timeout=20, message=f"pgbouncer ({mode}) accepting connections")

    def _run_as(self) -> int | None:
        # pgbouncer refuses to run as root. As root, run it as the owner of the backend's socket
        # directory (the only user sure to reach a private socket), else as postgres or nobody.
        if os.geteuid() != 0:
            return None
        if self.backend_host.startswith("/") and os.path.isdir(self.backend_host):
            owner = os.stat(self.backend_host).st_uid
            if owner != 0:
                return owner
        for name in ("postgres", "nobody"):
            try:
                return pwd.getpwnam(name).pw_uid
            except KeyError:
                continue
        raise RuntimeError("no non-root user to run pgbouncer as")

    def _accepts(self) -> bool:
        import psycopg

        if self.proc.poll() is not None:
            raise AssertionError(f"pgbouncer exited with {self.proc.returncode}:\n{self.log.read_text()}")
        try:
            psycopg.connect(self.conninfo(), connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False

    def conninfo(self, dbname: str | None = None) -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={dbname or self.dbname}"

    @property
    def url(self) -> str:
        # ILR_DB_NAME (the workers fixture sets it) replaces the database name in the path.
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{self.dbname}"

    def worker_env(self, **extra) -> dict:
        """The environment that points a subprocess's Django settings at this pgbouncer."""
        return {"DATABASE_URL": self.url, "ILR_POOLER": self.mode, **extra}

    def clients(self) -> list[tuple]:
        """SHOW CLIENTS on the admin console (simple query protocol only)."""
        import psycopg

        with psycopg.connect(self.conninfo("pgbouncer"), autocommit=True) as conn:
            result = conn.pgconn.exec_(b"SHOW CLIENTS")
            names = [result.fname(i).decode() for i in range(result.nfields)]
            rows = [
                {names[c]: (result.get_value(r, c) or b"").decode() for c in range(result.nfields)}
                for r in range(result.ntuples)
            ]
        return [row for row in rows if row.get("database") == self.dbname]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def pgbouncer(test_dsn):
    """A factory: ``pgbouncer("session")`` or ``pgbouncer("transaction")``; each one is
    terminated at teardown."""
    binary = _pgbouncer_binary()
    started: list[PgBouncer] = []

    def start(mode: str) -> PgBouncer:
        bouncer = PgBouncer(binary, mode)
        started.append(bouncer)
        return bouncer

    try:
        yield start
    finally:
        for bouncer in started:
            bouncer.close()


def test_pgbouncer_is_the_version_the_docs_name():
    """docs/guides/operating.md's "Through PgBouncer" names the version tested (Debian 12's 1.18) and the
    behaviour of every version: a newer one is not refused, only not the one named."""
    out = subprocess.run([_pgbouncer_binary(), "--version"], capture_output=True, text=True, check=True).stdout
    version = out.split()[1]
    assert tuple(int(p) for p in version.split(".")[:2]) >= (1, 18), out
    assert "PgBouncer 1.18" in (ROOT / "docs" / "guides" / "operating.md").read_text()


def test_session_mode_runs_a_refund_with_steps_a_signal_and_a_gated_effect(rt, workers, tmp_path, pgbouncer):
    """Session mode: the worker and the client both go through pgbouncer, and a refund (model
    decision, steps, the approval signal, a tier-2 gated effect) commits once with a valid receipt."""
    bouncer = pgbouncer("session")
    client = Runtime(bouncer.conninfo())
    try:
        with refund_env(tmp_path, 2) as env:
            workers.start("pb-session", env=env.worker_env(**bouncer.worker_env()))
            wait_for(lambda: "running" in workers.log("pb-session"), message="the worker's startup line")
            # The worker's connections (claims, heartbeat, LISTEN, runs) are pgbouncer clients.
            wait_for(lambda: len(bouncer.clients()) >= 4, message="the worker's connections on pgbouncer")
            case = env.case("pb-s1")
            client.start("refund_signal", "pb-s1", case)
            _, proposal = approve(client, "pb-s1")
            result = client.result("pb-s1", timeout=60)
            assert result["status"] == "COMMITTED", result
            refunds = [r for r in env.ledger(case["payment"]) if r["source"] == "api"]
            assert [r["amount"] for r in refunds] == [proposal["amount"]]
            verdict = receipts.verify(client.receipt(result["effect_id"]))
            assert verdict["valid"] and verdict["chain_intact"] and verdict["happened"] is True
        # NOTIFY reaches a worker's LISTEN through the pool: with a 30 s poll, a start and a
        # signal are claimed well before any poll would.
        workers.kill("pb-session")
        workers.start("pb-listen", poll=30, env=bouncer.worker_env())
        wait_for(lambda: "running" in workers.log("pb-listen"), message="the second worker's startup line")
        started = time.monotonic()
        client.start("waiter", "pb-s2", {})
        wait_for(lambda: client.describe("pb-s2")["status"] == "sleeping", timeout=15, message="pb-s2 waiting")
        client.signal("pb-s2", "approve", {"n": 2})
        assert client.result("pb-s2", timeout=15) == {"payload": {"n": 2}}
        assert time.monotonic() - started < 25
    finally:
        client.close()


def test_transaction_mode_worker_refuses_at_start_in_one_sentence(rt, workers, pgbouncer):
    """Transaction mode: a worker declaring ILR_POOLER=transaction exits 2 before it registers,
    with one line naming what needs session pooling; it claims nothing."""
    bouncer = pgbouncer("transaction")
    rt.start("three_steps", "pb-t0", {})
    proc = workers.start("pb-txn", env=bouncer.worker_env())
    assert proc.wait(60) == 2, workers.log("pb-txn")
    lines = [line for line in workers.log("pb-txn").splitlines() if line.strip()]
    assert lines == [
        (
            "ilr_worker pb-txn: ILR_POOLER is 'transaction', but a worker needs session pooling: it "
            "LISTENs for wakeups and keeps prepared statements (claims, effects, step records) on its "
            "connections for their lifetime; point the worker at a PgBouncer pool in pool_mode=session "
            "or straight at PostgreSQL"
        )
    ], lines
    assert rt.describe("pb-t0")["status"] == "pending"
    assert rt.connection().execute(COUNT_WORKER_DEPLOYMENTS).fetchone()["n"] == 0


def test_transaction_mode_client_and_django_app_work(rt, workers, tmp_path, pgbouncer):
    """Transaction mode: the Runtime client starts and approves a refund, and a Django process
    (ORM reads, signal_in inside transaction.atomic) signals a waiter, all through pgbouncer;
    a worker connected straight to PostgreSQL runs both to the end."""
    bouncer = pgbouncer("transaction")
    client = Runtime(bouncer.conninfo())
    try:
        with refund_env(tmp_path, 2) as env:
            workers.start("direct", env=env.worker_env())
            case = env.case("pb-t1")
            client.start("refund_signal", "pb-t1", case)
            _, proposal = approve(client, "pb-t1")
            result = client.result("pb-t1", timeout=60)
            assert result["status"] == "COMMITTED", result
            assert [r["amount"] for r in env.ledger(case["payment"]) if r["source"] == "api"] == [proposal["amount"]]
        client.start("waiter", "pb-t2", {})
        wait_for(lambda: client.describe("pb-t2")["status"] == "sleeping", message="pb-t2 waiting")
    finally:
        client.close()
    script = (
        "from django.db import connection, transaction\n"
        "from ilr import signal_in\n"
        "from ilr.models import Workflow\n"
        "from django.conf import settings\n"
        "assert settings.DATABASES['default']['DISABLE_SERVER_SIDE_CURSORS']\n"
        "assert Workflow.objects.get(id='pb-t2').status == 'sleeping'\n"
        "assert [w.id for w in Workflow.objects.filter(id='pb-t2').iterator()] == ['pb-t2']\n"
        "with transaction.atomic():\n"
        "    signal_in(connection.connection, 'pb-t2', 'approve', {'n': 3}, sender='django')\n"
        "print('signalled', Workflow.objects.filter(id__startswith='pb-t').count())\n"
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", script],
        check=False,
        cwd=ROOT,
        env=workers.env(bouncer.worker_env()),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "signalled 2"
    assert rt.result("pb-t2", timeout=20) == {"payload": {"n": 3}}


def test_an_unknown_pooler_is_refused():
    """ILR_POOLER accepts unset, "session" or "transaction" only."""
    from ilr._errors import PoolerRefused
    from ilr._worker.pooler import check_pooler

    for ok in (None, "session"):
        check_pooler(ok)
    with pytest.raises(PoolerRefused, match="must be unset, 'session' or 'transaction', got 'statement'"):
        check_pooler("statement")
    with pytest.raises(PoolerRefused, match="needs session pooling"):
        check_pooler("transaction")
