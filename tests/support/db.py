"""The test database and the cluster under it: the ilr tables, what the test workflows logged,
and the embedded PostgreSQL."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.support.queries.claims import EPOCH_OWNER_VERSION_OF_CLAIMS_BY_WORKFLOW_ID
from tests.support.queries.grants import COUNTS_OF_GRANTS_SIGNALS_EFFECTS
from tests.support.queries.workflows import COUNT_WORKFLOWS, ID_STATUS_OF_WORKFLOWS_BY_ID

ILR_TABLES = (
    "ilr.approval_requests, ilr.slots, ilr.journal, ilr.effects, ilr.grants, ilr.signals, ilr.llm_calls, ilr.steps, "
    "ilr.claims, ilr.responses, ilr.schedule_ticks, ilr.schedules, ilr.workflows, ilr.worker_deployments, "
    "ilr.deployments"
)
"""Every ilr table, for one TRUNCATE (the append-only triggers refuse DELETE)."""


def embedded_cluster():
    """The embedded PostgreSQL the settings point at, or None under DATABASE_URL."""
    from django.conf import settings

    from interlock_project.embedded_pg import EmbeddedPostgres

    pgdata = getattr(settings, "ILR_EMBEDDED_PGDATA", None)
    return EmbeddedPostgres(pgdata) if pgdata else None


def embedded_cluster_or_skip():
    """The embedded PostgreSQL, for a test that stops and starts it; skips under DATABASE_URL."""
    cluster = embedded_cluster()
    if cluster is None:
        pytest.skip("restarting the database needs the embedded PostgreSQL")  # pragma: no cover
    return cluster


def proxy_upstream(dsn: str) -> tuple[str, dict]:
    """The server address a fault proxy forwards to for ``dsn`` (its socket or host:port), and
    ``dsn``'s parameters."""
    params = conninfo_to_dict(dsn)
    host, port = params.get("host", "/tmp"), params.get("port", "5432")
    return (f"unix:{host}/.s.PGSQL.{port}" if host.startswith("/") else f"{host}:{port}"), params


def invocations(rt, wf_id, name=None):
    """How many times the test workflows' step bodies ran for ``wf_id`` (by ``name``)."""
    q = "select count(*) as n from public.test_invocations where workflow_id = %s"
    args = [wf_id]
    if name:
        q += " and name = %s"
        args.append(name)
    return rt.connection().execute(q, args).fetchone()["n"]


def count_workflows(rt):
    return rt.connection().execute(COUNT_WORKFLOWS).fetchone()["n"]


def superuser(test_dsn, sql: str, params: tuple = ()) -> None:
    """Run ``sql`` as the database superuser with the triggers off (the append-only one too)."""
    from ilr import _db as db

    with db.connect(test_dsn) as conn:
        conn.execute("set session_replication_role = replica")
        conn.execute(sql, params)


def write_counts(rt):
    """How many grants, signals and effects there are: what a refused call must leave as it was."""
    return rt.connection().execute(COUNTS_OF_GRANTS_SIGNALS_EFFECTS).fetchone()


def status(rt, wf_id):
    return rt.describe(wf_id)["status"]


def drain(rt, name, version) -> dict:
    """The drain report's row of (name, version); {} while it is not deployed yet."""
    rows = rt.drain_report(name, version)
    assert len(rows) <= 1, rows
    return rows[0] if rows else {}


def statuses(rt, ids) -> dict:
    """{workflow id: status} of the workflows ``ids`` (the ones that exist)."""
    rows = rt.connection().execute(ID_STATUS_OF_WORKFLOWS_BY_ID, (list(ids),)).fetchall()
    return {r["id"]: r["status"] for r in rows}


def claims(rt, wf_id) -> list[dict]:
    """A workflow's claims (epoch, owner, version), in epoch order."""
    return rt.connection().execute(EPOCH_OWNER_VERSION_OF_CLAIMS_BY_WORKFLOW_ID, (wf_id,)).fetchall()


def database_url(dsn: str) -> str:
    """A postgresql:// URL for a libpq conninfo (host and port as query parameters, which also
    carries a Unix socket directory)."""
    params = conninfo_to_dict(dsn)
    auth = quote(params.pop("user", "") or "", safe="")
    if params.get("password"):
        auth += ":" + quote(params.pop("password"), safe="")
    name = quote(params.pop("dbname"), safe="")
    return f"postgresql://{auth}@/{name}?{urlencode(params)}"
