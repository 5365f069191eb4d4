"""Deployments: resolve the version a start uses, migrate a workflow to another version, the
drain report, retire, and which versions have due work no live worker serves (docs/protocol.md
§4, versions).

``migrate_in``, ``drain_report_in`` and ``retire_in`` are transaction bodies on any psycopg 3
connection (Django's included), shared by ``Runtime`` and the approvals app.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ilr import _db as db
from ilr import _registry as registry
from ilr._codec import check_workflow_id
from ilr._errors import InvalidInput, UnknownWorkflow, WorkflowNotFound
from ilr._queries.claims import MIGRATE_IN_INSERT_CLAIMS
from ilr._queries.deployments import (
    DEPLOY_ON_INSERT_DEPLOYMENTS,
    MIGRATE_IN_SELECT_DEPLOYMENTS,
    RESOLVE_VERSION_ON_SELECT_DEPLOYMENTS,
    RESOLVE_VERSION_ON_SELECT_DEPLOYMENTS_2,
    RETIRE_IN_LOCK_DEPLOYMENTS,
    RETIRE_IN_UPDATE_DEPLOYMENTS,
    UNSERVED_SQL,
    drain_report_sql,
)
from ilr._queries.workflows import MIGRATE_IN_LOCK_WORKFLOWS, MIGRATE_IN_UPDATE_WORKFLOWS
from ilr._statuses import ACTIVE

MIGRATE_OWNER = "$migrate"


NO_WORKER_ROW = "no worker row: none left since a clean exit, or none ever"
"""What an unserved pair with no ilr.worker_deployments row (``last_seen`` None) reads as in
ilr_check and the admin: a worker deletes its rows when it exits cleanly, so no row does not
mean the version was never served."""


def unserved_on(conn: db.Connection) -> list[dict]:
    """The (name, version) pairs with due work (DUE_SQL) and no live worker, on ``conn``.

    Returns:
        [{"name", "version", "due": n, "last_seen": the latest seen_at of any worker for the
        pair, or None when no worker row is left}], by name then version.
    """
    return conn.cursor(row_factory=dict_row).execute(UNSERVED_SQL).fetchall()


def deploy_on(conn, definition) -> None:
    """Insert the deployments row of ``definition`` (a WorkflowDefinition) unless it exists."""
    conn.execute(
        DEPLOY_ON_INSERT_DEPLOYMENTS,
        (definition.name, definition.version, definition.code_sha256),
    )


def resolve_version_on(conn: db.Connection, name: str, version: str | None = None) -> str:
    """The version a start (``rt.start``, ``ctx.child``) uses, on ``conn`` (docs/protocol.md §4).

    ``version`` given: it must be deployed or registered in this process (then it is
    deployed with this process's code hash), and not retired. ``version`` None: the newest
    unretired deployment; with none deployed, the newest version registered here that is not a
    retired deployment.

    Returns:
        the version string.

    Raises:
        InvalidInput: empty name or version; the version is retired, or every version of the
            name is (field "version").
        UnknownWorkflow: nothing registered or deployed under that name/version.
    """
    if not isinstance(name, str) or not name:
        raise InvalidInput("name", "a workflow name must be a non-empty string")
    if version is not None:
        if not isinstance(version, str) or not version:
            raise InvalidInput("version", f"a version is a non-empty string or None, got {version!r}")
        row = conn.execute(MIGRATE_IN_SELECT_DEPLOYMENTS, (name, version)).fetchone()
        if row is not None and row["retired_at"] is not None:
            raise InvalidInput("version", f"{name}@{version} is retired and takes no new starts")
        if row is None:
            deploy_on(conn, registry.get(name, version))
        return version
    row = conn.execute(
        RESOLVE_VERSION_ON_SELECT_DEPLOYMENTS,
        (name,),
    ).fetchone()
    if row is not None:
        return row["version"]
    # Retired ones only: a worker may deploy an unretired version between the two reads.
    retired = {r["version"] for r in conn.execute(RESOLVE_VERSION_ON_SELECT_DEPLOYMENTS_2, (name,)).fetchall()}
    local = [d for d in registry.versions(name) if d.version not in retired]
    if not local:
        if retired:
            raise InvalidInput(
                "version",
                f"every deployed version of {name} is retired ({', '.join(sorted(retired))}); it takes no new starts",
            )
        raise UnknownWorkflow(name, None)
    deploy_on(conn, local[-1])
    return local[-1].version


def check_input_shape(name: str, version: str, input: Any) -> None:
    """Raise InvalidInput (field "input") when ``name@version`` is registered here, requires a
    JSON object, and ``input`` is not one. Unregistered here: nothing to check."""
    try:
        definition = registry.get(name, version)
    except UnknownWorkflow:
        return
    if definition.input_object and not isinstance(input, dict):
        raise InvalidInput("input", f"{name}@{version} takes a JSON object, got {type(input).__name__}")


def migrate_in(conn: psycopg.Connection[Any], wf_id: str, to_version: str) -> dict:
    """The transaction body of ``Runtime.migrate`` (see there: the rule and what it writes).

    Returns:
        {"workflow_id", "name", "from_version", "to_version", "status"}.

    Raises:
        InvalidInput: a bad id or version; the workflow is running or has ended (field
            "workflow_id"); the version is unknown or retired, or is a stuck workflow's own
            (field "to_version").
        WorkflowNotFound: no workflow ``wf_id``.
    """
    check_workflow_id(wf_id)
    if not isinstance(to_version, str) or not to_version:
        raise InvalidInput("to_version", f"a version is a non-empty string, got {to_version!r}")
    cur = conn.cursor(row_factory=dict_row)
    wf = cur.execute(MIGRATE_IN_LOCK_WORKFLOWS, (wf_id,)).fetchone()
    if wf is None:
        raise WorkflowNotFound(wf_id)
    if wf["status"] == "running":
        raise InvalidInput(
            "workflow_id",
            f"workflow {wf_id} is running (claimed by {wf['owner']}); migrate "
            f"only a workflow that is not running: wait until it suspends",
        )
    if wf["status"] not in ("pending", "sleeping", "stuck"):
        raise InvalidInput(
            "workflow_id",
            f"workflow {wf_id} has ended ({wf['status']}); only pending, sleeping or stuck workflows migrate",
        )
    dep = cur.execute(MIGRATE_IN_SELECT_DEPLOYMENTS, (wf["name"], to_version)).fetchone()
    if dep is None:
        try:
            deploy_on(conn, registry.get(wf["name"], to_version))
        except UnknownWorkflow:
            raise InvalidInput(
                "to_version",
                f"{wf['name']}@{to_version} is not deployed: start a worker that registers it, then migrate",
            ) from None
    elif dep["retired_at"] is not None:
        raise InvalidInput("to_version", f"{wf['name']}@{to_version} is retired")
    out = {"workflow_id": wf_id, "name": wf["name"], "from_version": wf["version"], "to_version": to_version}
    if to_version == wf["version"]:
        if wf["status"] == "stuck":
            # Changing nothing would leave it stuck while the caller believes it moved.
            raise InvalidInput(
                "to_version",
                f"workflow {wf_id} is stuck on {wf['name']}@{to_version} "
                f"already: resume it on its own version with rt.resume",
            )
        return {**out, "status": wf["status"]}
    row = cur.execute(
        MIGRATE_IN_UPDATE_WORKFLOWS,
        (to_version, wf_id),
    ).fetchone()
    assert row is not None  # the row was locked FOR UPDATE above, so the update matched it
    cur.execute(
        MIGRATE_IN_INSERT_CLAIMS,
        (wf_id, row["epoch"], MIGRATE_OWNER, to_version, row["now"], row["now"], wf["status"]),
    )
    return {**out, "status": row["status"]}


def drain_report_in(conn: psycopg.Connection[Any], name: str | None = None, version: str | None = None) -> list[dict]:
    """Whether each deployed version can retire, and whether anything serves it (the rows of
    ``Runtime.drain_report``; the approvals app's DrainReport is built from them).

    Five reads on ``conn``, not one snapshot: run in autocommit, each sees what committed
    before it.

    Args:
        name, version: filters; default every deployment.

    Returns:
        one row per deployment, by name, created_at, version: {"name", "version",
        "retired_at", "counts": {status: n}, "active": n, "oldest_pending": {"id", "status",
        "created_at"} or None, "drained": active == 0, "workers": [ids of the workers live for
        it (LIVE_SQL), by worker_id], "due": n workflows a worker would claim now (DUE_SQL),
        "unserved": due > 0 and no worker is live for it}.
    """
    clauses, params = [], []
    for column, value in (("d.name", name), ("d.version", version)):
        if value is not None:
            clauses.append(f"{column} = %s")
            params.append(value)
    where = f"where {' and '.join(clauses)}" if clauses else ""
    cur = conn.cursor(row_factory=dict_row)
    sql = drain_report_sql(where)
    deps = cur.execute(sql["deployments"], params).fetchall()
    counts = cur.execute(sql["counts"], params).fetchall()
    oldest = cur.execute(sql["oldest"], params).fetchall()
    due = cur.execute(sql["due"], params).fetchall()
    live = cur.execute(sql["live"], params).fetchall()
    by_key = {
        (d["name"], d["version"]): {
            "name": d["name"],
            "version": d["version"],
            "retired_at": d["retired_at"],
            "counts": {},
            "active": 0,
            "oldest_pending": None,
            "drained": True,
            "workers": [],
            "due": 0,
            "unserved": False,
        }
        for d in deps
    }
    for c in counts:
        row = by_key[(c["name"], c["version"])]
        row["counts"][c["status"]] = c["n"]
        if c["status"] in ACTIVE:
            row["active"] += c["n"]
            row["drained"] = False
    for o in oldest:
        by_key[(o["name"], o["version"])]["oldest_pending"] = {
            "id": o["id"],
            "status": o["status"],
            "created_at": o["created_at"],
        }
    for s in live:
        by_key[(s["name"], s["version"])]["workers"].append(s["worker_id"])
    for d in due:
        row = by_key[(d["name"], d["version"])]
        row["due"] = d["n"]
        row["unserved"] = not row["workers"]
    return list(by_key.values())


@dataclass(frozen=True)
class Retirement:
    """What ``retire_in`` found and did.

    Attributes:
        retired_at: when the version was retired (database time): now, or the first time.
        already: True when it had been retired before (this call changed nothing).
    """

    retired_at: Any
    already: bool


def retire_in(conn: psycopg.Connection[Any], name: str, version: str) -> Retirement | None:
    """Retire deployment ``name@version`` inside the caller's transaction: it takes no new starts
    (``resolve_version_on`` refuses it); its existing workflows run on. The row is locked first,
    so of two concurrent retirements one sets retired_at and the other reads it (the first
    retirement stands).

    Returns:
        a Retirement, or None when no deployment (name, version) exists (nothing written).
    """
    cur = conn.cursor(row_factory=dict_row)
    row = cur.execute(RETIRE_IN_LOCK_DEPLOYMENTS, (name, version)).fetchone()
    if row is None:
        return None
    if row["retired_at"] is not None:
        return Retirement(row["retired_at"], already=True)
    row = cur.execute(
        RETIRE_IN_UPDATE_DEPLOYMENTS,
        (name, version),
    ).fetchone()
    assert row is not None  # the row was locked FOR UPDATE above, so the update matched it
    return Retirement(row["retired_at"], already=False)
