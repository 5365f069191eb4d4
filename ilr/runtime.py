"""The client: start, signal, cancel, resume, describe, list, result, and the version
operations fork, migrate, drain_report, retire (docs/protocol.md §4, §5, §7).

``signal_in``, ``cancel_in`` and ``resume_in`` are the transaction bodies: they run inside a caller's
transaction on any psycopg 3 connection (Django's included: ``connection.connection`` inside
``transaction.atomic()``), so admin actions and race tests share the runtime's exact SQL.
Lock order everywhere: workflow row, then effect row, then grant row.
"""

from __future__ import annotations

import builtins
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ilr import codec, db, receipts, registry
from ilr.approval_requests import approve_request_in, get_in, list_in, reject_request_in
from ilr.codec import check_workflow_id
from ilr.errors import InvalidInput, UnknownWorkflow, WorkflowConflict, WorkflowFailed, WorkflowNotFound
from ilr.grants import EffectNotFound, approve_in, grant_in, reconcile_in, revoke_in
from ilr.orphans import recover_orphans
from ilr.statuses import ACTIVE, STATUSES, TERMINAL  # noqa: F401 (re-exported)
from ilr.store import successor_id

MAX_LIST_LIMIT = 10_000
FORK_OWNER = "$fork"
MIGRATE_OWNER = "$migrate"

DUE_SQL = """(w.status in ('pending','sleeping') and w.available_at <= now())
          or (w.status = 'running' and w.lease_expires_at <= now())"""
"""A workflow a worker would claim now: pending or sleeping and available, or running with a
lapsed lease (CLAIM_SQL's two scans)."""

LIVE_SQL = "s.live_until > now()"
"""A worker_deployments row ``s`` whose worker is live: refreshed within its own staleness bound
(ilr.worker.DEPLOYMENT_STALE_AFTER refresh periods; the worker writes live_until)."""

UNSERVED_SQL = f"""
with due as (
  select w.name, w.version, count(*) as due from (
    select name, version from ilr.workflows
     where status in ('pending','sleeping') and available_at <= now()
    union all
    select name, version from ilr.workflows
     where status = 'running' and lease_expires_at <= now()) w
   group by w.name, w.version)
select due.name, due.version, due.due,
       (select max(s.seen_at) from ilr.worker_deployments s
         where s.name = due.name and s.version = due.version) as last_seen
  from due
 where not exists (select 1 from ilr.worker_deployments s
                    where s.name = due.name and s.version = due.version and {LIVE_SQL})
 order by due.name, due.version
"""


def unserved_on(conn: db.Connection) -> list[dict]:
    """The (name, version) pairs with due work (DUE_SQL) and no live worker, on ``conn``.

    Returns:
        [{"name", "version", "due": n, "last_seen": the latest seen_at of any worker for the
        pair, or None when no worker row is left}], by name then version.
    """
    return conn.execute(UNSERVED_SQL).fetchall()


def _finite_seconds(value: Any, *, minimum_open: bool) -> bool:
    """A real number of seconds: finite, >= 0 (> 0 with ``minimum_open``), not a bool."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
        return False
    return value > 0 if minimum_open else value >= 0


def _lock_workflow(cur, wf_id: str) -> dict:
    row = cur.execute("select id, status, waiting, cancel_requested_at, continued_from from ilr.workflows "
                      "where id = %s for update", (wf_id,)).fetchone()
    if row is None:
        raise WorkflowNotFound(wf_id)
    return row


def _lock_current_run(cur, wf_id: str) -> dict:
    """Lock ``wf_id``'s row; when it continued-as-new, follow the chain to the current run and
    lock that (messages to a workflow id reach its latest run, as in Temporal)."""
    wf = _lock_workflow(cur, wf_id)
    while wf["status"] == "continued":
        nxt = cur.execute("select id from ilr.workflows where id = %s",
                          (successor_id(wf["id"], wf["continued_from"]),)).fetchone()
        if nxt is None:
            break
        wf = _lock_workflow(cur, nxt["id"])
    return wf


def _deploy(conn, definition) -> None:
    conn.execute("insert into ilr.deployments (name, version, code_sha256) values (%s, %s, %s) "
                 "on conflict do nothing", (definition.name, definition.version, definition.code_sha256))


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
        row = conn.execute("select retired_at from ilr.deployments where name = %s and version = %s",
                           (name, version)).fetchone()
        if row is not None and row["retired_at"] is not None:
            raise InvalidInput("version", f"{name}@{version} is retired and takes no new starts")
        if row is None:
            _deploy(conn, registry.get(name, version))
        return version
    row = conn.execute("select version from ilr.deployments where name = %s and retired_at is null "
                       "order by created_at desc, version desc limit 1", (name,)).fetchone()
    if row is not None:
        return row["version"]
    # Retired ones only: a worker may deploy an unretired version between the two reads.
    retired = {r["version"] for r in conn.execute(
        "select version from ilr.deployments where name = %s and retired_at is not null", (name,)).fetchall()}
    local = [d for d in registry.versions(name) if d.version not in retired]
    if not local:
        if retired:
            raise InvalidInput("version", f"every deployed version of {name} is retired "
                                          f"({', '.join(sorted(retired))}); it takes no new starts")
        raise UnknownWorkflow(name, None)
    _deploy(conn, local[-1])
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


def signal_in(conn: psycopg.Connection[Any], wf_id: str, name: str, payload: Any, sender: str | None = None) -> int:
    """Insert signal ``name`` for ``wf_id`` and wake it if it waits on that signal.

    Runs inside the caller's transaction. It locks the workflow row first, so against the
    suspend transaction (which fences, i.e. locks, the same row first) either this commits
    before the mailbox read, or it waits and then sees the row sleeping and wakes it
    (NoLostWakeup, docs/protocol.md §5.1). A workflow that continued-as-new passes the signal to
    its current run (§5.3).

    Args:
        conn: a psycopg 3 connection inside a transaction.
        payload: plain JSON, None included (stored as JSON null; the wait returns it as sent).

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
    wf = _lock_current_run(cur, wf_id)
    if wf["status"] in TERMINAL or wf["status"] == "continued":
        raise InvalidInput("workflow_id", f"workflow {wf['id']} is {wf['status']}; it takes no more signals")
    sig = cur.execute("insert into ilr.signals (workflow_id, name, payload, sender) values (%s, %s, %s::jsonb, %s) "
                      "returning id", (wf["id"], name, payload_json, sender)).fetchone()
    assert sig is not None  # an INSERT ... RETURNING without ON CONFLICT returns its row or raises
    waiting = codec.loads_jsonb(wf["waiting"]) or {}
    if wf["status"] == "sleeping" and waiting.get("kind") == "signal" and waiting.get("signal") == name:
        cur.execute("update ilr.workflows set available_at = now(), updated_at = now() where id = %s", (wf["id"],))
    return sig["id"]


@dataclass(frozen=True)
class CancelRequest:
    """What a cancel did: whether it requested the cancel, and which sends may still land.

    A cancel stops every send not yet authorized; it cannot recall one already authorized. A
    send whose T_dispatch (or recovery resend) committed before the cancel goes out, or was
    already out, when the cancel commits; its effect is listed until it resolves, as
    ``rt.revoke`` lists the effects a revoke cannot stop.

    Attributes:
        requested: True when this call requested the cancel; False when the workflow had
            already ended or a cancel was already requested. The object's truth value.
        may_still_land: ids of the effects in state dispatched under the workflow or its
            children (sorted): their sends were authorized before the cancel and may land.
    """

    requested: bool
    may_still_land: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.requested


def cancel_in(conn: psycopg.Connection[Any], wf_id: str, by: str | None = None) -> CancelRequest:
    """Request cancellation of ``wf_id`` inside the caller's transaction.

    Sets cancel_requested_at and cancel_requested_by (``by``: who asks) once (the first cancel
    wins) and wakes a sleeping or pending workflow, so the Cancelled exception is delivered at
    its next durable call. Running children are cancelled too (lock order parent, then
    children), and a workflow that continued-as-new is cancelled in its current run. From the
    commit on, T_dispatch refuses every non-compensation send (NoSendAfterCancel).

    Returns:
        a CancelRequest: truthy when this call requested the cancel, and the effects whose
        authorized sends may still land.

    Raises:
        WorkflowNotFound: no workflow has this id.
        InvalidInput: a bad workflow id, or a ``by`` that does not name who cancels.
    """
    check_workflow_id(wf_id)
    if by is not None:
        codec.check_who(by)
    cur = conn.cursor(row_factory=dict_row)
    wf = _lock_current_run(cur, wf_id)
    requested = _cancel_tree(cur, wf, by)
    # Read after the workflow rows are locked. T_dispatch's fence updates the same row first, so
    # a T_dispatch either committed before the lock was granted (its dispatched state is visible
    # to this later statement: READ COMMITTED) or waits for this commit and then refuses on
    # cancel_requested_at. What this lists is exactly what the cancel could not stop.
    landing = cur.execute(
        "with recursive tree(id) as (select %s::text union "
        "select w.id from ilr.workflows w join tree t on w.parent_id = t.id) "
        "select effect_id from ilr.effects where state = 'dispatched' "
        "and dispatch_workflow_id in (select id from tree) order by effect_id", (wf["id"],)).fetchall()
    return CancelRequest(requested, tuple(r["effect_id"] for r in landing))


def _cancel_tree(cur, wf: dict, by: str | None) -> bool:
    """Cancel the locked workflow row ``wf`` and its running children; True when it requested."""
    if wf["status"] in TERMINAL or wf["status"] == "continued" or wf["cancel_requested_at"] is not None:
        return False
    cur.execute(
        "update ilr.workflows set cancel_requested_at = now(), cancel_requested_by = %s, updated_at = now(), "
        "available_at = case when status in ('sleeping','pending') then now() else available_at end "
        "where id = %s", (by, wf["id"]))
    children = cur.execute(
        "select id from ilr.workflows where parent_id = %s and status not in "
        "('completed','failed','cancelled','stuck','continued') order by id", (wf["id"],)).fetchall()
    for child in children:
        _cancel_tree(cur, _lock_current_run(cur, child["id"]), by)
    return True


def resume_in(conn: psycopg.Connection[Any], wf_id: str, by: str) -> dict:
    """Resume a stuck workflow inside the caller's transaction: an operator's way back from a
    crash loop, a NonDeterminism after the code was fixed, or a swallowed Suspend.

    Rule: only a stuck workflow resumes. It becomes pending and due now, with takeovers reset to
    0 (the crash-loop guard starts over), the error cleared, and resumed_by / resumed_at set;
    nothing else changes. Kept: every recorded step row (its outputs and errors), signals
    consumed or not, effects and their journal, the epoch, the waiting state (a recorded timer
    keeps its deadline), a requested cancel, the version (``Runtime.migrate`` changes that).
    Re-run: the next claim replays the workflow code over the recorded steps; the first step
    without a row runs its body again (at least once, as after any crash), and an effect left
    dispatched goes through recovery, never a blind resend.

    No run of the workflow is in flight: its stuck write (CrashLoop, NonDeterminism, Suspend
    swallowed) is the last write of the claim that made it, no worker claims a stuck row, and
    the row lock taken here orders this against any other resume, migrate or cancel. The next
    claim bumps the epoch as every claim does.

    Args:
        by: who resumes (a person or service; recorded as resumed_by).

    Returns:
        {"workflow_id", "status": "pending", "error": the error it was stuck with (now cleared),
        "steps": how many step rows it keeps, "resumed_by", "resumed_at"}.

    Raises:
        InvalidInput: a bad workflow id (field "workflow_id"), a ``by`` that names no one (field
            "by"), or a workflow that is not stuck (field "workflow_id"); nothing is written.
        WorkflowNotFound: no workflow has this id.
    """
    check_workflow_id(wf_id)
    codec.check_who(by)
    cur = conn.cursor(row_factory=dict_row)
    wf = cur.execute("select id, status, error from ilr.workflows where id = %s for update", (wf_id,)).fetchone()
    if wf is None:
        raise WorkflowNotFound(wf_id)
    if wf["status"] != "stuck":
        raise InvalidInput("workflow_id", f"workflow {wf_id} is {wf['status']}: only a stuck workflow resumes")
    row = cur.execute(
        "update ilr.workflows set status = 'pending', available_at = now(), takeovers = 0, error = null, "
        "owner = null, lease_expires_at = null, resumed_by = %s, resumed_at = now(), updated_at = now() "
        "where id = %s returning resumed_at, (select count(*) from ilr.steps where workflow_id = %s) as steps",
        (by, wf_id, wf_id)).fetchone()
    assert row is not None  # the row was locked FOR UPDATE above, so the update matched it
    return {"workflow_id": wf_id, "status": "pending", "error": wf["error"], "steps": row["steps"],
            "resumed_by": by, "resumed_at": row["resumed_at"]}


class Runtime:
    """Client of the ilr tables. Thread-safe (one connection behind a lock).

    Args:
        dsn: a libpq conninfo or URL; default Django's DATABASES["default"].
    """

    def __init__(self, dsn: str | None = None):
        self._dsn = dsn
        self._conn: db.Connection | None = None
        self._lock = threading.RLock()

    # -- plumbing --------------------------------------------------------------------------------

    def connection(self) -> db.Connection:
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
        registered here, and not retired), else the newest unretired deployment (see
        ``resolve_version_on``; docs/protocol.md §4).

        Raises:
            UnknownWorkflow: nothing registered or deployed under that name/version.
            InvalidInput: the version is retired (or every version is).
        """
        with self._lock:
            return resolve_version_on(self.connection(), name, version)

    @staticmethod
    def _deploy(conn, definition) -> None:
        _deploy(conn, definition)

    def start(self, name: str, wf_id: str, input: Any = None, version: str | None = None) -> str:
        """Start workflow ``name`` with id ``wf_id``; idempotent on the id.

        Args:
            name: the registered workflow name.
            wf_id: 1 to 200 characters; a second start with the same id and name returns it.
            input: plain JSON; a JSON object unless the workflow says otherwise. Default {}.
            version: default the newest unretired version; a retired version takes no new
                starts.

        Returns:
            wf_id.

        Raises:
            InvalidInput: bad id, input not plain JSON or not an object where one is required,
                a retired version.
            UnknownWorkflow: unknown name or version.
            WorkflowConflict: the id exists for another workflow name.
        """
        check_workflow_id(wf_id)
        if input is None:
            input = {}
        input_json = codec.dumps(input, "input")
        version = self.resolve_version(name, version)
        check_input_shape(name, version, input)
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
        """Send signal ``name`` to ``wf_id`` (see ``signal_in``): the wait returns ``payload``
        exactly as sent (default None, stored as JSON null). Returns the signal id."""
        return self._tx(signal_in, wf_id, name, payload, sender)

    def cancel(self, wf_id: str, by: str | None = None) -> CancelRequest:
        """Request cancellation; truthy when this call requested it, with the effects whose
        authorized sends may still land (see ``cancel_in`` and ``CancelRequest``)."""
        return self._tx(cancel_in, wf_id, by)

    def resume(self, wf_id: str, *, by: str) -> dict:
        """Resume a stuck workflow on its own code and version (see ``resume_in``: what it keeps
        and what it re-runs). Fix the cause first (deploy the fixed code, remove the fault), or it
        comes back stuck.

        Returns:
            {"workflow_id", "status": "pending", "error" (the cleared one), "steps",
            "resumed_by", "resumed_at"}.

        Raises:
            InvalidInput: not stuck (field "workflow_id"), or no ``by`` (field "by").
            WorkflowNotFound: no workflow has this id.
        """
        return self._tx(resume_in, wf_id, by)

    # -- reads -------------------------------------------------------------------------------

    def describe(self, wf_id: str) -> dict:
        """The workflow row with its steps, effects, signals and waiting state; never runs code.

        Returns:
            the row's columns, plus "steps", "effects", "signals", "children" and "last_error":
            a step (or decide) whose attempt failed and is waiting to retry has
            ``{"type", "message", "attempt", "at"}`` there (``waiting["last_error"]``: the
            exception type, its message cut at 2000 characters, the failed attempt's number
            and the database time), else None.

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
        wf["last_error"] = (wf["waiting"] or {}).get("last_error")
        return wf

    def list(self, status: str | None = None, name: str | None = None, version: str | None = None,
             limit: int = 100) -> list[dict]:
        """Workflow rows (no steps), newest first, filtered by status, name and version.

        Args:
            status: one of STATUSES, or None for any.
            limit: at most this many rows, 1 to MAX_LIST_LIMIT.

        Raises:
            InvalidInput: an unknown status, a name or version that is not an id, a bad limit.
        """
        if status is not None and status not in STATUSES:
            raise InvalidInput("status", f"must be one of {', '.join(STATUSES)}, got {status!r}")
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIST_LIMIT:
            raise InvalidInput("limit", f"must be an integer from 1 to {MAX_LIST_LIMIT}, got {limit!r}")
        clauses, params = [], []
        for column, value in (("status", status), ("name", name), ("version", version)):
            if value is not None:
                clauses.append(f"{column} = %s")
                params.append(codec.check_text(value, column))
        where = f"where {' and '.join(clauses)}" if clauses else ""
        with self._lock:
            return self.connection().execute(
                f"select id, name, version, status, epoch, owner, available_at, waiting, result, error, "
                f"created_at, updated_at from ilr.workflows {where} order by created_at desc limit %s",
                (*params, limit)).fetchall()

    def result(self, wf_id: str, timeout: float | None = None, poll: float = 0.05) -> Any:
        """Wait for the workflow to end and return its result, following continue-as-new.

        Args:
            timeout: seconds to wait (a finite number >= 0); None waits forever.
            poll: seconds between reads (a finite number > 0).

        Returns:
            the workflow's result.

        Raises:
            WorkflowFailed: it ended failed, stuck or cancelled.
            TimeoutError: not ended within ``timeout`` seconds.
            WorkflowNotFound: no workflow has this id.
            InvalidInput: a bad workflow id, timeout or poll.
        """
        check_workflow_id(wf_id)
        if timeout is not None and not _finite_seconds(timeout, minimum_open=False):
            raise InvalidInput("timeout", f"must be a finite number of seconds >= 0, or None, got {timeout!r}")
        if not _finite_seconds(poll, minimum_open=True):
            raise InvalidInput("poll", f"must be a finite number of seconds > 0, got {poll!r}")
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

    # -- versions: fork, migrate, drain, retire (docs/protocol.md §4) -------------------------

    def fork(self, wf_id: str, at_seq: int, new_id: str) -> str:
        """Temporal's reset: a new workflow ``new_id`` with ``wf_id``'s name, version and
        input, and copies of its steps below ``at_seq``; it replays them and runs on from
        ``at_seq`` (docs/protocol.md §4, versions). The original is left as it is.

        One transaction writes the new row (pending, ``forked_from`` = wf_id), a synthetic
        claim (owner ``$fork``, epoch 1) that the copied step rows carry, and the copies. A
        fork that reaches an effect the original committed gets DUPLICATE_IGNORED and sends
        nothing (ForkNeverResends); one that reaches it with another payload is
        REFUSED:conflicting_payload (the payload stays bound to the effect id). Signals are not
        copied: a fork from before a wait_signal waits for a new signal.

        Args:
            wf_id: the workflow to fork (any status).
            at_seq: 1 (replay nothing: start over with the same input) to the last recorded
                seq + 1 (copy every step).
            new_id: the fork's id; must not exist.

        Returns:
            new_id.

        Raises:
            InvalidInput: a bad id; ``at_seq`` not an integer >= 1 or beyond the history
                (field "at_seq"); ``new_id`` already exists (field "new_id"). Nothing written.
            WorkflowNotFound: no workflow ``wf_id``.
        """
        check_workflow_id(wf_id)
        check_workflow_id(new_id, "new_id")
        if not isinstance(at_seq, int) or isinstance(at_seq, bool) or at_seq < 1:
            raise InvalidInput("at_seq", f"a fork point is a seq, an integer >= 1, got {at_seq!r}")

        def body(conn):
            src = conn.execute("select id, name, version from ilr.workflows where id = %s",
                               (wf_id,)).fetchone()
            if src is None:
                raise WorkflowNotFound(wf_id)
            top = conn.execute("select coalesce(max(seq), 0) as top from ilr.steps where workflow_id = %s",
                               (wf_id,)).fetchone()["top"]
            if at_seq > top + 1:
                raise InvalidInput("at_seq", f"seq {at_seq} is beyond the history of {wf_id} (steps 1 to {top}); "
                                             f"fork at 1 to {top + 1} ({top + 1} copies every step)")
            inserted = conn.execute(
                "insert into ilr.workflows (id, name, version, input, forked_from, epoch) "
                "select %s, name, version, input, id, 1 from ilr.workflows where id = %s "
                "on conflict (id) do nothing returning id", (new_id, wf_id)).fetchone()
            if inserted is None:
                raise InvalidInput("new_id", f"a workflow {new_id!r} already exists; a fork needs a new id")
            # The copies are written under a synthetic claim (epoch 1, owner $fork), so every step
            # row belongs to a claimed epoch (FencedWrites); the first worker claim is epoch 2.
            conn.execute(
                "insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at, "
                "prev_status) values (%s, 1, %s, %s, now(), now(), 'pending')", (new_id, FORK_OWNER, src["version"]))
            conn.execute(
                "insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, error, epoch) "
                "select %s, seq, name, kind, fingerprint, output, error, 1 from ilr.steps "
                "where workflow_id = %s and seq < %s order by seq", (new_id, wf_id, at_seq))
            return new_id

        return self._tx(body)

    def migrate(self, wf_id: str, to_version: str) -> dict:
        """Move a workflow that is not running to another deployed version of its name
        (docs/protocol.md §4). Its history replays on ``to_version``'s code, so that code must
        replay it (use ``ctx.patched`` for the differences). A stuck workflow (e.g. NonDeterminism)
        becomes pending again, to resume on the new code.

        One transaction locks the row, checks, sets the version, bumps the epoch and records a
        synthetic claim (owner ``$migrate``, the new version) as the audit trail. Migrating to
        the version it already has changes nothing (for a stuck workflow it is InvalidInput: use
        ``resume``).

        Args:
            wf_id: a pending, sleeping or stuck workflow.
            to_version: a deployed (or registered here) version of the same name, not retired.

        Returns:
            {"workflow_id", "name", "from_version", "to_version", "status"}.

        Raises:
            InvalidInput: the workflow is running or has ended (field "workflow_id"); the
                version is unknown or retired, or is a stuck workflow's own (field
                "to_version"). Nothing is written.
            WorkflowNotFound: no workflow ``wf_id``.
        """
        check_workflow_id(wf_id)
        if not isinstance(to_version, str) or not to_version:
            raise InvalidInput("to_version", f"a version is a non-empty string, got {to_version!r}")

        def body(conn):
            wf = conn.execute("select id, name, version, status, owner from ilr.workflows where id = %s for update",
                              (wf_id,)).fetchone()
            if wf is None:
                raise WorkflowNotFound(wf_id)
            if wf["status"] == "running":
                raise InvalidInput("workflow_id", f"workflow {wf_id} is running (claimed by {wf['owner']}); migrate "
                                                  f"only a workflow that is not running: wait until it suspends")
            if wf["status"] not in ("pending", "sleeping", "stuck"):
                raise InvalidInput("workflow_id", f"workflow {wf_id} has ended ({wf['status']}); "
                                                  f"only pending, sleeping or stuck workflows migrate")
            dep = conn.execute("select retired_at from ilr.deployments where name = %s and version = %s",
                               (wf["name"], to_version)).fetchone()
            if dep is None:
                try:
                    _deploy(conn, registry.get(wf["name"], to_version))
                except UnknownWorkflow:
                    raise InvalidInput("to_version", f"{wf['name']}@{to_version} is not deployed: start a worker "
                                                     f"that registers it, then migrate") from None
            elif dep["retired_at"] is not None:
                raise InvalidInput("to_version", f"{wf['name']}@{to_version} is retired")
            out = {"workflow_id": wf_id, "name": wf["name"], "from_version": wf["version"], "to_version": to_version}
            if to_version == wf["version"]:
                if wf["status"] == "stuck":
                    # Changing nothing would leave it stuck while the caller believes it moved.
                    raise InvalidInput("to_version", f"workflow {wf_id} is stuck on {wf['name']}@{to_version} "
                                                     f"already: resume it on its own version with rt.resume")
                return {**out, "status": wf["status"]}
            row = conn.execute(
                "update ilr.workflows set version = %s, epoch = ilr.next_epoch(epoch), updated_at = now(), "
                "status = case when status = 'stuck' then 'pending' else status end, "
                "error = case when status = 'stuck' then null else error end, "
                "available_at = case when status = 'stuck' then now() else available_at end, "
                "takeovers = case when status = 'stuck' then 0 else takeovers end "
                "where id = %s returning epoch, status, now() as now", (to_version, wf_id)).fetchone()
            conn.execute(
                "insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at, "
                "prev_status) values (%s, %s, %s, %s, %s, %s, %s)",
                (wf_id, row["epoch"], MIGRATE_OWNER, to_version, row["now"], row["now"], wf["status"]))
            return {**out, "status": row["status"]}

        return self._tx(body)

    def drain_report(self, name: str | None = None, version: str | None = None) -> builtins.list[dict]:
        """Whether each deployed version can retire, and whether anything serves it: its workflows
        counted by (name, version, status), its oldest active (pending, running or sleeping)
        one, its live workers and its due work (docs/protocol.md §4, versions).

        Args:
            name, version: filters; default every deployment.

        Returns:
            one row per deployment, by name then version: {"name", "version", "retired_at",
            "counts": {status: n}, "active": n, "oldest_pending": {"id", "status",
            "created_at"} or None, "drained": active == 0, "workers": [ids of the workers live
            for it (LIVE_SQL)], "due": n workflows a worker would claim now (DUE_SQL),
            "unserved": due > 0 and no worker is live for it}. ``unserved()`` lists exactly
            the unserved pairs.
        """
        clauses, params = [], []
        for column, value in (("d.name", name), ("d.version", version)):
            if value is not None:
                clauses.append(f"{column} = %s")
                params.append(value)
        where = f"where {' and '.join(clauses)}" if clauses else ""
        with self._lock:
            conn = self.connection()
            deps = conn.execute(f"select d.name, d.version, d.retired_at, d.created_at from ilr.deployments d {where} "
                                f"order by d.name, d.created_at, d.version", params).fetchall()
            counts = conn.execute(
                f"select w.name, w.version, w.status, count(*) as n from ilr.workflows w "
                f"join ilr.deployments d on d.name = w.name and d.version = w.version {where} "
                f"group by w.name, w.version, w.status", params).fetchall()
            oldest = conn.execute(
                f"select distinct on (w.name, w.version) w.name, w.version, w.id, w.status, w.created_at "
                f"from ilr.workflows w join ilr.deployments d on d.name = w.name and d.version = w.version "
                f"{where} {'and' if where else 'where'} w.status in ('pending','running','sleeping') "
                f"order by w.name, w.version, w.created_at, w.id", params).fetchall()
            due = conn.execute(
                f"select w.name, w.version, count(*) as n from ilr.workflows w "
                f"join ilr.deployments d on d.name = w.name and d.version = w.version "
                f"{where} {'and' if where else 'where'} ({DUE_SQL}) group by w.name, w.version", params).fetchall()
            live = conn.execute(
                f"select s.name, s.version, s.worker_id from ilr.worker_deployments s "
                f"join ilr.deployments d on d.name = s.name and d.version = s.version "
                f"{where} {'and' if where else 'where'} {LIVE_SQL} order by s.worker_id", params).fetchall()
        by_key = {(d["name"], d["version"]): {"name": d["name"], "version": d["version"], "retired_at": d["retired_at"],
                                              "counts": {}, "active": 0, "oldest_pending": None, "drained": True,
                                              "workers": [], "due": 0, "unserved": False}
                  for d in deps}
        for c in counts:
            row = by_key[(c["name"], c["version"])]
            row["counts"][c["status"]] = c["n"]
            if c["status"] in ACTIVE:
                row["active"] += c["n"]
                row["drained"] = False
        for o in oldest:
            by_key[(o["name"], o["version"])]["oldest_pending"] = {"id": o["id"], "status": o["status"],
                                                                   "created_at": o["created_at"]}
        for s in live:
            by_key[(s["name"], s["version"])]["workers"].append(s["worker_id"])
        for d in due:
            row = by_key[(d["name"], d["version"])]
            row["due"] = d["n"]
            row["unserved"] = not row["workers"]
        return list(by_key.values())

    def unserved(self) -> builtins.list[dict]:
        """The deployments with due work and no live worker: a workflow a worker would claim
        now (pending or sleeping and available, or running with a lapsed lease) of a (name,
        version) that no worker has refreshed within its staleness bound (3 refresh periods,
        ilr.worker.DEPLOYMENT_STALE_AFTER). Nothing claims such work until a worker that
        registers the pair starts (or ``migrate`` moves it).

        Returns:
            [{"name", "version", "due": n, "last_seen": when any worker last served the pair,
            or None}], by name then version (see ``unserved_on``).
        """
        with self._lock:
            return unserved_on(self.connection())

    def retire(self, name: str, version: str) -> Any:
        """Retire a deployed version: it takes no new starts (``rt.start``, ``ctx.child``); its
        existing workflows keep running on workers that register it (docs/protocol.md §4). Check
        ``drain_report`` first to see what is still active. Retiring twice keeps the first time.

        Returns:
            retired_at (database time).

        Raises:
            InvalidInput: no deployment (name, version) (field "version").
        """
        if not isinstance(name, str) or not name:
            raise InvalidInput("name", "a workflow name must be a non-empty string")
        if not isinstance(version, str) or not version:
            raise InvalidInput("version", f"a version is a non-empty string, got {version!r}")
        with self._lock:
            row = self.connection().execute(
                "update ilr.deployments set retired_at = coalesce(retired_at, now()) where name = %s and version = %s "
                "returning retired_at", (name, version)).fetchone()
        if row is None:
            raise InvalidInput("version", f"{name}@{version} is not deployed")
        return row["retired_at"]

    # -- grants, approvals, receipts (docs/protocol.md §7, §9) --------------------------

    def grant(self, principal: str, action: str, max_cents: int | None = None, expires_in: float | None = None,
              *, by: str, grant_id: str | None = None) -> str:
        """A policy grant (see ilr.grants.grant_in). Returns its id."""

        return self._tx(grant_in, principal, action, by=by, max_cents=max_cents, expires_in=expires_in,
                        grant_id=grant_id)

    def approve(self, wf_id: str, payload: Any, facts_seen: Any, *, by: str, expires_in: float | None = None,
                action: str = "refund") -> str:
        """Approve the exact payload a waiting workflow proposed (see ilr.grants.approve_in)."""

        return self._tx(approve_in, wf_id, payload, facts_seen, by=by, expires_in=expires_in, action=action)

    def approve_request(self, request_id: str, *, by: str, expires_in: float | None = None) -> dict:
        """Approve an approval request as ``by`` (see ilr.approval_requests.approve_request_in);
        returns the request row (still pending when a second approver is needed)."""

        return self._tx(approve_request_in, request_id, by=by, expires_in=expires_in)

    def reject_request(self, request_id: str, *, by: str, reason: str) -> dict:
        """Reject an approval request (see ilr.approval_requests.reject_request_in)."""

        return self._tx(reject_request_in, request_id, by=by, reason=reason)

    def approval_request(self, request_id: str) -> dict:
        """One approval request row. Raises ApprovalRequestNotFound."""

        return self._tx(get_in, request_id)

    def approval_requests(self, status: str | None = "pending", limit: int = 200) -> builtins.list[dict]:
        """Approval requests with ``status`` (None: any), oldest first."""

        return self._tx(list_in, status, limit)

    def revoke(self, grant_id: str, *, by: str) -> builtins.list[str]:
        """Revoke a grant; returns the effect ids that may still land (see ilr.grants.revoke_in)."""

        return self._tx(revoke_in, grant_id, by=by)

    def ambiguous(self) -> builtins.list[dict]:
        """Effects in state ambiguous, oldest dispatch first, with any reconciliation."""
        with self._lock:
            return self.connection().execute(
                "select * from ilr.effects where state = 'ambiguous' order by first_dispatched_at").fetchall()

    def reconcile(self, effect_id: str, evidence: Any, *, by: str, applied: bool | None = None) -> dict:
        """Attest what happened to an AMBIGUOUS effect (see ilr.grants.reconcile_in)."""

        return self._tx(reconcile_in, effect_id, evidence, by=by, applied=applied)

    def receipt(self, effect_id: str, public_key=None) -> dict:
        """The receipt bundle of an effect (ilr.receipts.bundle); verify it with ilr.receipts.verify.

        Raises:
            EffectNotFound: unknown effect id.
            InvalidInput: effect_id is not an id (codec.check_text).
        """

        codec.check_text(effect_id, "effect_id")
        with self._lock:
            try:
                return receipts.bundle(self.connection(), effect_id, public_key)
            except LookupError:
                raise EffectNotFound(effect_id) from None

    def recover_orphans(self, targets: dict | None = None) -> builtins.list[dict]:
        """Resolve dispatched effects whose workflow ended: stuck, failed, cancelled, or
        completed after catching a Cancelled (see ilr.orphans.recover_orphans).

        Args:
            targets: target name -> target object, for every target the orphans were sent to;
                default the targets registered with ``register_target``. A target built per
                case (the demo's LocalRefunds) must be passed here.

        Returns:
            one report row per orphan (recover_orphans')."""

        return recover_orphans(self._dsn, targets)

