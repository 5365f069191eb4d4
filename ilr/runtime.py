"""The client: start, signal, cancel, describe, list, result (spec §6).

``signal_in`` and ``cancel_in`` are the transaction bodies: they run inside a caller's
transaction on any psycopg 3 connection (Django's included: ``connection.connection`` inside
``transaction.atomic()``), so admin actions and race tests share the runtime's exact SQL.
Lock order everywhere: workflow row, then effect row, then grant row.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ilr import codec, db, registry
from ilr.errors import InvalidInput, UnknownWorkflow, WorkflowConflict, WorkflowFailed, WorkflowNotFound

MAX_ID_LENGTH = 200
TERMINAL = ("completed", "failed", "cancelled", "stuck")


def check_workflow_id(wf_id: Any, field: str = "workflow_id") -> str:
    """Raise InvalidInput unless ``wf_id`` is a non-empty str of at most 200 characters."""
    if not isinstance(wf_id, str) or not wf_id.strip():
        raise InvalidInput(field, "must be a non-empty string")
    if len(wf_id) > MAX_ID_LENGTH:
        raise InvalidInput(field, f"must be at most {MAX_ID_LENGTH} characters, got {len(wf_id)}")
    if "\x00" in wf_id:
        raise InvalidInput(field, "may not hold a NUL character")
    return wf_id


def _lock_workflow(cur, wf_id: str) -> dict:
    row = cur.execute("select id, status, waiting, cancel_requested_at from ilr.workflows where id = %s for update",
                      (wf_id,)).fetchone()
    if row is None:
        raise WorkflowNotFound(wf_id)
    return row


def signal_in(conn: psycopg.Connection, wf_id: str, name: str, payload: Any, sender: str | None = None) -> int:
    """Insert signal ``name`` for ``wf_id`` and wake it if it waits on that signal.

    Runs inside the caller's transaction. It locks the workflow row first, so against the
    suspend transaction (which fences, i.e. locks, the same row first) either this commits
    before the mailbox read, or it waits and then sees the row sleeping and wakes it
    (NoLostWakeup, spec §5.6).

    Args:
        conn: a psycopg 3 connection inside a transaction.
        payload: plain JSON.

    Returns:
        the signal id.

    Raises:
        WorkflowNotFound: no workflow has this id.
        InvalidInput: empty name, payload not plain JSON, or the workflow already ended.
    """
    check_workflow_id(wf_id)
    if not isinstance(name, str) or not name:
        raise InvalidInput("name", "a signal needs a non-empty name")
    payload_json = codec.dumps(payload, "payload")
    cur = conn.cursor(row_factory=dict_row)
    wf = _lock_workflow(cur, wf_id)
    if wf["status"] in TERMINAL or wf["status"] == "continued":
        raise InvalidInput("workflow_id", f"workflow {wf_id} is {wf['status']}; it takes no more signals")
    sig = cur.execute("insert into ilr.signals (workflow_id, name, payload, sender) values (%s, %s, %s::jsonb, %s) "
                      "returning id", (wf_id, name, payload_json, sender)).fetchone()
    waiting = codec.loads_jsonb(wf["waiting"]) or {}
    if wf["status"] == "sleeping" and waiting.get("kind") == "signal" and waiting.get("signal") == name:
        cur.execute("update ilr.workflows set available_at = now(), updated_at = now() where id = %s", (wf_id,))
    return sig["id"]


def cancel_in(conn: psycopg.Connection, wf_id: str, by: str | None = None) -> bool:
    """Request cancellation of ``wf_id`` inside the caller's transaction.

    Sets cancel_requested_at once (the first cancel wins) and wakes a sleeping or pending
    workflow, so the Cancelled exception is delivered at its next durable call. Running
    children are cancelled too (spec §5.8). From the commit on, T_dispatch refuses every
    non-compensation send (NoSendAfterCancel).

    Returns:
        True when this call requested the cancel; False when the workflow had already ended
        or a cancel was already requested.

    Raises:
        WorkflowNotFound: no workflow has this id.
    """
    check_workflow_id(wf_id)
    cur = conn.cursor(row_factory=dict_row)
    wf = _lock_workflow(cur, wf_id)
    if wf["status"] in TERMINAL or wf["status"] == "continued" or wf["cancel_requested_at"] is not None:
        return False
    cur.execute(
        "update ilr.workflows set cancel_requested_at = now(), updated_at = now(), "
        "available_at = case when status in ('sleeping','pending') then now() else available_at end "
        "where id = %s", (wf_id,))
    children = cur.execute(
        "select id from ilr.workflows where parent_id = %s and status not in "
        "('completed','failed','cancelled','stuck','continued') order by id", (wf_id,)).fetchall()
    for child in children:
        cancel_in(conn, child["id"], by)
    return True


class Runtime:
    """Client of the ilr tables. Thread-safe (one connection behind a lock).

    Args:
        dsn: a libpq conninfo or URL; default Django's DATABASES["default"].
    """

    def __init__(self, dsn: str | None = None):
        self._dsn = dsn
        self._conn: psycopg.Connection | None = None
        self._lock = threading.RLock()

    # -- plumbing --------------------------------------------------------------------------------

    def connection(self) -> psycopg.Connection:
        """The client's autocommit connection (reopened when broken)."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = db.connect(self._dsn or db.conninfo(), application_name="ilr-client")
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _tx(self, body, *args, **kwargs):
        with self._lock:
            conn = self.connection()
            with conn.transaction():
                return body(conn, *args, **kwargs)

    # -- starting ----------------------------------------------------------------------------

    def resolve_version(self, name: str, version: str | None = None) -> str:
        """The version a start would use: ``version`` when given (it must be deployed or
        registered here, and not retired), else the newest unretired deployment.

        Raises:
            UnknownWorkflow: nothing registered or deployed under that name/version.
            InvalidInput: the version is retired.
        """
        if not isinstance(name, str) or not name:
            raise InvalidInput("name", "a workflow name must be a non-empty string")
        with self._lock:
            conn = self.connection()
            if version is not None:
                row = conn.execute("select retired_at from ilr.deployments where name = %s and version = %s",
                                   (name, version)).fetchone()
                if row is not None and row["retired_at"] is not None:
                    raise InvalidInput("version", f"{name}@{version} is retired and takes no new starts")
                if row is None:
                    definition = registry.get(name, version)
                    self._deploy(conn, definition)
                return version
            row = conn.execute("select version from ilr.deployments where name = %s and retired_at is null "
                               "order by created_at desc, version desc limit 1", (name,)).fetchone()
            if row is not None:
                return row["version"]
            local = registry.versions(name)
            if not local:
                raise UnknownWorkflow(name, None)
            self._deploy(conn, local[-1])
            return local[-1].version

    @staticmethod
    def _deploy(conn, definition) -> None:
        conn.execute("insert into ilr.deployments (name, version, code_sha256) values (%s, %s, %s) "
                     "on conflict do nothing", (definition.name, definition.version, definition.code_sha256))

    def start(self, name: str, wf_id: str, input: Any = None, version: str | None = None) -> str:
        """Start workflow ``name`` with id ``wf_id``; idempotent on the id.

        Args:
            name: the registered workflow name.
            wf_id: 1 to 200 characters; a second start with the same id and name returns it.
            input: plain JSON; a JSON object unless the workflow says otherwise. Default {}.
            version: default the newest unretired version.

        Returns:
            wf_id.

        Raises:
            InvalidInput: bad id, input not plain JSON or not an object where one is required.
            UnknownWorkflow: unknown name or version.
            WorkflowConflict: the id exists for another workflow name.
        """
        check_workflow_id(wf_id)
        if input is None:
            input = {}
        input_json = codec.dumps(input, "input")
        version = self.resolve_version(name, version)
        try:
            definition = registry.get(name, version)
        except UnknownWorkflow:
            definition = None
        if definition is not None and definition.input_object and not isinstance(input, dict):
            raise InvalidInput("input", f"{name}@{version} takes a JSON object, got {type(input).__name__}")
        with self._lock:
            conn = self.connection()
            row = conn.execute(
                "insert into ilr.workflows (id, name, version, input) values (%s, %s, %s, %s::jsonb) "
                "on conflict (id) do nothing returning id", (wf_id, name, version, input_json)).fetchone()
            if row is None:
                existing = conn.execute("select name from ilr.workflows where id = %s", (wf_id,)).fetchone()
                if existing and existing["name"] != name:
                    raise WorkflowConflict(f"workflow_id: {wf_id!r} already belongs to a {existing['name']} workflow")
        return wf_id

    # -- messages ----------------------------------------------------------------------------

    def signal(self, wf_id: str, name: str, payload: Any = None, sender: str | None = None) -> int:
        """Send signal ``name`` to ``wf_id`` (see ``signal_in``). Returns the signal id."""
        return self._tx(signal_in, wf_id, name, {} if payload is None else payload, sender)

    def cancel(self, wf_id: str, by: str | None = None) -> bool:
        """Request cancellation (see ``cancel_in``)."""
        return self._tx(cancel_in, wf_id, by)

    # -- reads -------------------------------------------------------------------------------

    def describe(self, wf_id: str) -> dict:
        """The workflow row with its steps, effects, signals and waiting state; never runs code.

        Raises:
            WorkflowNotFound: no workflow has this id.
        """
        check_workflow_id(wf_id)
        with self._lock:
            conn = self.connection()
            wf = conn.execute("select * from ilr.workflows where id = %s", (wf_id,)).fetchone()
            if wf is None:
                raise WorkflowNotFound(wf_id)
            wf["steps"] = conn.execute("select seq, name, kind, fingerprint, output, error, epoch, created_at "
                                       "from ilr.steps where workflow_id = %s order by seq", (wf_id,)).fetchall()
            wf["effects"] = conn.execute("select * from ilr.effects where workflow_id = %s order by effect_id",
                                         (wf_id,)).fetchall()
            wf["signals"] = conn.execute("select * from ilr.signals where workflow_id = %s order by id",
                                         (wf_id,)).fetchall()
            wf["children"] = [r["id"] for r in conn.execute(
                "select id from ilr.workflows where parent_id = %s order by created_at", (wf_id,)).fetchall()]
        return wf

    def list(self, status: str | None = None, name: str | None = None, version: str | None = None,
             limit: int = 100) -> list[dict]:
        """Workflow rows (no steps), newest first, filtered by status, name and version."""
        clauses, params = [], []
        for column, value in (("status", status), ("name", name), ("version", version)):
            if value is not None:
                clauses.append(f"{column} = %s")
                params.append(value)
        where = f"where {' and '.join(clauses)}" if clauses else ""
        with self._lock:
            return self.connection().execute(
                f"select id, name, version, status, epoch, owner, available_at, waiting, result, error, "
                f"created_at, updated_at from ilr.workflows {where} order by created_at desc limit %s",
                (*params, limit)).fetchall()

    def result(self, wf_id: str, timeout: float | None = None, poll: float = 0.05) -> Any:
        """Wait for the workflow to end and return its result, following continue-as-new.

        Args:
            timeout: seconds to wait; None waits forever.

        Returns:
            the workflow's result.

        Raises:
            WorkflowFailed: it ended failed, stuck or cancelled.
            TimeoutError: not ended within ``timeout`` seconds.
            WorkflowNotFound: no workflow has this id.
        """
        check_workflow_id(wf_id)
        deadline = None if timeout is None else time.monotonic() + timeout
        current = wf_id
        while True:
            with self._lock:
                row = self.connection().execute(
                    "select status, result, error from ilr.workflows where id = %s", (current,)).fetchone()
                successor = None
                if row is not None and row["status"] == "continued":
                    successor = self.connection().execute(
                        "select id from ilr.workflows where continued_from = %s", (current,)).fetchone()
            if row is None:
                raise WorkflowNotFound(current)
            if row["status"] == "completed":
                return row["result"]
            if row["status"] in ("failed", "cancelled", "stuck"):
                raise WorkflowFailed(current, row["status"], row["error"])
            if successor is not None:
                current = successor["id"]
                continue
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"workflow {current} did not end within {timeout} s (status {row['status']})")
            time.sleep(poll)

    # -- grants, approvals, receipts (spec §6) -------------------------------------------

    def grant(self, principal: str, action: str, max_cents: int | None = None, expires_in: float | None = None,
              *, by: str, grant_id: str | None = None) -> str:
        """A policy grant (see ilr.grants.grant_in). Returns its id."""
        from ilr.grants import grant_in

        return self._tx(grant_in, principal, action, by=by, max_cents=max_cents, expires_in=expires_in,
                        grant_id=grant_id)

    def approve(self, wf_id: str, payload: Any, facts_seen: Any, *, by: str, expires_in: float | None = None,
                action: str = "refund") -> str:
        """Approve the exact payload a waiting workflow proposed (see ilr.grants.approve_in)."""
        from ilr.grants import approve_in

        return self._tx(approve_in, wf_id, payload, facts_seen, by=by, expires_in=expires_in, action=action)

    def revoke(self, grant_id: str, *, by: str) -> list[str]:
        """Revoke a grant; returns the effect ids that may still land (see ilr.grants.revoke_in)."""
        from ilr.grants import revoke_in

        return self._tx(revoke_in, grant_id, by=by)

    def ambiguous(self) -> list[dict]:
        """Effects in state ambiguous, oldest dispatch first, with any reconciliation."""
        with self._lock:
            return self.connection().execute(
                "select * from ilr.effects where state = 'ambiguous' order by first_dispatched_at").fetchall()

    def reconcile(self, effect_id: str, evidence: Any, *, by: str, applied: bool | None = None) -> dict:
        """Attest what happened to an AMBIGUOUS effect (see ilr.grants.reconcile_in)."""
        from ilr.grants import reconcile_in

        return self._tx(reconcile_in, effect_id, evidence, by=by, applied=applied)

    def receipt(self, effect_id: str, public_key=None) -> dict:
        """The receipt bundle of an effect (ilr.receipts.bundle); verify it with ilr.receipts.verify.

        Raises:
            EffectNotFound: unknown effect id.
        """
        from ilr import receipts
        from ilr.grants import EffectNotFound

        with self._lock:
            try:
                return receipts.bundle(self.connection(), effect_id, public_key)
            except LookupError:
                raise EffectNotFound(effect_id) from None

    def recover_orphans(self, targets: dict | None = None) -> list[dict]:
        """Resolve dispatched effects whose workflow ended stuck, failed or cancelled (see
        ilr.orphans.recover_orphans). Returns one report row per orphan."""
        from ilr.orphans import recover_orphans

        return recover_orphans(self._dsn, targets)

