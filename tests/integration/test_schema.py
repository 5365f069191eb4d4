"""The schema and its migrations: procrastinate's three checks (every SQL migration referenced by
exactly one Django migration, ``makemigrations --check`` clean, schema.sql equal to the replay)."""

from __future__ import annotations

import re
import subprocess
import sys

from django.core.management import call_command

from tests.support import ROOT
from tests.support.queries.workflows import REGCLASS_OF_WORKFLOWS

SQL_DIR = ROOT / "ilr" / "sql"


def test_every_sql_migration_is_referenced_by_exactly_one_django_migration():
    sources = "\n".join(p.read_text() for p in (ROOT / "ilr" / "migrations").glob("0*.py"))
    files = sorted(p.name for p in (SQL_DIR / "migrations").glob("*.sql"))
    assert files, "no SQL migrations found"
    for name in files:
        assert len(re.findall(rf'RunSQLFile\(\s*"{re.escape(name)}"', sources)) == 1, name


def test_makemigrations_finds_nothing(db):
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


def _scratch(test_dsn, name):
    from ilr import _db as db

    with db.connect(test_dsn) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')
        conn.execute(f'create database "{name}"')
    return test_dsn.replace(f"dbname={_dbname(test_dsn)}", f"dbname={name}")


def _dbname(dsn):
    return re.search(r"dbname=(\S+)", dsn).group(1)


def _drop(test_dsn, name):
    from ilr import _db as db

    with db.connect(test_dsn) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


def _catalog(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    from interlock_project.embedded_pg import pg_bin

    params = conninfo_to_dict(dsn)
    args = [pg_bin("pg_dump"), "--schema-only", "--schema=ilr", "--no-owner", "--no-privileges"]
    for key, flag in (("host", "-h"), ("port", "-p"), ("user", "-U")):
        if params.get(key):
            args += [flag, str(params[key])]
    out = subprocess.run([*args, params["dbname"]], capture_output=True, text=True, check=True).stdout
    return "\n".join(
        line for line in out.splitlines() if line and not line.startswith(("--", "\\restrict", "\\unrestrict"))
    )


def test_schema_sql_and_replayed_migrations_produce_the_same_catalog(test_dsn, django_db_blocker):
    from ilr import _db as db

    with django_db_blocker.unblock():
        a = _scratch(test_dsn, "ilr_catalog_schema")
        b = _scratch(test_dsn, "ilr_catalog_migrations")
        try:
            with db.connect(a) as conn:
                conn.execute((SQL_DIR / "schema.sql").read_text())
            with db.connect(b) as conn:
                for path in sorted((SQL_DIR / "migrations").glob("*.sql")):
                    conn.execute(path.read_text())
            assert _catalog(a) == _catalog(b)
            assert "CREATE TABLE ilr.workflows" in _catalog(a)
            assert "NULLS NOT DISTINCT" in _catalog(a)
        finally:
            _drop(test_dsn, "ilr_catalog_schema")
            _drop(test_dsn, "ilr_catalog_migrations")


def test_migrate_creates_and_migrating_to_zero_drops(test_dsn, django_db_blocker, tmp_path):
    from ilr import _db as db
    from tests.support.workers import WorkerProcs

    with django_db_blocker.unblock():
        dsn = _scratch(test_dsn, "ilr_migrate_roundtrip")
        env = WorkerProcs(tmp_path).env({"ILR_DB_NAME": "ilr_migrate_roundtrip"})
        manage = [sys.executable, str(ROOT / "manage.py")]
        try:
            subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
            with db.connect(dsn) as conn:
                assert conn.execute(REGCLASS_OF_WORKFLOWS).fetchone()["t"] == "ilr.workflows"
            subprocess.run([*manage, "migrate", "ilr", "zero", "-v0"], cwd=ROOT, env=env, check=True)
            with db.connect(dsn) as conn:
                assert conn.execute("select count(*) as n from pg_namespace where nspname = 'ilr'").fetchone()["n"] == 0
            # A worker refuses to start while an ilr migration is pending.
            worker = subprocess.run(
                [*manage, "ilr_worker", "--id", "w", "--import", "tests.support.flows"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert worker.returncode != 0 and "ilr migrations are pending" in worker.stderr
        finally:
            _drop(test_dsn, "ilr_migrate_roundtrip")
