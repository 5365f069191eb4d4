"""The client ``Runtime``: start, signal, cancel, terminate, resume, describe, list, result, the
version operations (docs/protocol.md §4, §5, §7), the flow-control reads, schedules (§5.8). A facade: the
transaction bodies it runs (``*_in``) live beside the tables they write, in ``ilr._ops``, and run
on any psycopg 3 connection, so admin actions and race tests share its exact SQL.
"""

from __future__ import annotations

import builtins
import threading
from typing import Any

from ilr import _codec as codec
from ilr import _db as db
from ilr._codec import check_workflow_id
from ilr._effects.orphans import recover_orphans
from ilr._effects.reconcile import reconcile_in
from ilr._errors import EffectNotFound, InvalidInput
from ilr._journal import receipts
from ilr._ops.approval_requests import approve_request_in, get_in, list_in, reject_request_in
from ilr._ops.deployments import (
    check_input_shape,
    deploy_on,
    drain_report_in,
    migrate_in,
    resolve_version_on,
    retire_in,
    unserved_on,
)
from ilr._ops.grants import approve_in, grant_in, revoke_in
from ilr._ops.lifecycle import TerminateRequest, terminate_in
from ilr._ops.reads import describe_on, list_query, outcome_on, wait_result
from ilr._ops.slots import concurrency_for, describe_key, queue_for, queues_on, revoke_lock_in
from ilr._ops.starts import check_dedup, check_priority, start_in
from ilr._ops.workflow_ops import (
    CancelRequest,
    cancel_in,
    fork_in,
    resume_in,
    signal_in,
)
from ilr._queries.effects import AMBIGUOUS_SELECT_EFFECTS
from ilr._schedules.client import ScheduleCalls
from ilr._telemetry import hooks


class Runtime(ScheduleCalls):
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
        deploy_on(conn, definition)

    @hooks.traced_start
    def start(
        self,
        name: str,
        wf_id: str,
        input: Any = None,
        version: str | None = None,
        *,
        priority: int = 0,
        concurrency_key: str | None = None,
        concurrency_limit: int | None = None,
        on_conflict: str | None = None,
        dedup_key: str | None = None,
        dedup_window: float | None = None,
        queue: str | None = None,
    ) -> str:
        """Start workflow ``name`` with id ``wf_id``; idempotent on the id.

        Args:
            name: the registered workflow name.
            wf_id: 1 to 200 characters, without '/' or '#' (the separators of derived child and
                successor ids); a second start with the same id and name returns it.
            input: plain JSON; a JSON object unless the workflow says otherwise. Default {}.
            version: default the newest unretired version; a retired version takes no new
                starts.
            priority: -100 to 100; among due workflows a higher one is claimed first, and a
                queued one is admitted first. Default 0.
            concurrency_key: the key whose slot this run holds from its start to its end (1 to
                200 characters); default the workflow's ``Concurrency`` rule, else none. A start
                that finds the key full queues (FIFO by priority, then start time) without a
                worker, and runs when a holder completes, fails or is cancelled
                (docs/protocol.md §5.4).
            concurrency_limit: slots of the key, 1 to 1000; default the rule's, else 1.
            on_conflict: "queue", "reject", "cancel_running" or "replace_queued" (see
                ``ilr.Concurrency``); default the rule's, else "queue".
            dedup_key, dedup_window: with both (1 to 200 characters; seconds, at most 30
                days), a start while a workflow of the same key started less than the window
                ago (database clock) starts nothing and returns that workflow's id.
            queue: a queue of ILR_QUEUES; default the workflow's. Its concurrency limit holds
                like a key's, and its rates delay a start that would exceed them.

        Returns:
            wf_id, or the deduplicated workflow's id: a str whose ``deduplicated`` attribute
            says which.

        Raises:
            InvalidInput: bad id, input not plain JSON or not an object where one is required,
                a retired version, a bad priority, key, limit, on_conflict, dedup_key,
                dedup_window or an unknown queue (each naming its field).
            UnknownWorkflow: unknown name or version.
            WorkflowConflict: the id exists for another workflow name.
            ConcurrencyLimitReached: on_conflict "reject" and the key is full; nothing is
                written.
        """
        codec.check_new_workflow_id(wf_id)
        check_priority(priority)
        if input is None:
            input = {}
        input_json = codec.dumps(input, "input")
        version = self.resolve_version(name, version)
        check_input_shape(name, version, input)
        key, limit, policy = concurrency_for(name, version, input, concurrency_key, concurrency_limit, on_conflict)
        dedup = check_dedup(dedup_key, dedup_window)
        q = queue_for(name, version, queue)
        args = (wf_id, name, version, input_json)
        if key is None and dedup[0] is None:
            # One INSERT on the autocommit connection, no transaction round trips.
            with self._lock:
                return start_in(self.connection(), *args, priority=priority, queue=q)
        kw = {"key": key, "limit": limit, "on_conflict": policy, "dedup_key": dedup[0], "dedup_window": dedup[1]}
        return self._tx(start_in, *args, priority=priority, queue=q, **kw)

    def queues(self) -> list[dict]:
        """Every queue of ILR_QUEUES: its rule, how many of its workflows hold a slot, wait,
        and started in the last rate period (see ``queues_on``)."""
        with self._lock:
            return queues_on(self.connection())

    def revoke_lock(self, wf_id: str, key: str, *, by: str) -> dict:
        """Take a ``ctx.lock`` slot of ``key`` away from workflow ``wf_id`` (see
        ``revoke_lock_in``): the next waiter gets it now, and the workflow's gated sends inside
        that block are refused from now on. Returns {"released", "may_still_land"}."""
        return self._tx(revoke_lock_in, wf_id, key, by)

    def concurrency(self, key: str) -> dict:
        """A concurrency key's holders and queue (docs/protocol.md §5.4).

        Returns:
            {"key", "holders": [{"workflow_id", "slot_no", "acquired_at"}], "waiting":
            [{"workflow_id", "position" (1 = next), "priority", "queued_at"}]}.

        Raises:
            InvalidInput: a bad key (field "concurrency_key").
        """
        with self._lock:
            return describe_key(self.connection(), key)

    # -- messages ----------------------------------------------------------------------------

    @hooks.traced_signal
    def signal(self, wf_id: str, name: str, payload: Any = None, sender: str | None = None) -> int:
        """Send signal ``name`` to ``wf_id`` (see ``signal_in``): the wait returns ``payload``
        exactly as sent (default None, stored as JSON null). Returns the signal id."""
        return self._tx(signal_in, wf_id, name, payload, sender)

    def cancel(self, wf_id: str, by: str | None = None, *, children: str = "tree") -> CancelRequest:
        """Request cancellation; truthy when this call requested it, with the effects whose
        authorized sends may still land and what it did to each running descendant
        (``children``: "tree" or "policy"; see ``cancel_in`` and ``CancelRequest``)."""
        return self._tx(cancel_in, wf_id, by, children)

    def terminate(self, wf_id: str, *, reason: str, by: str) -> TerminateRequest:
        """End ``wf_id`` now, with no compensation (see ``terminate_in``): truthy when this call
        ended it, with the effects whose authorized sends may still land and what its children's
        parent close policies did."""
        return self._tx(terminate_in, wf_id, reason, by)

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
            and the database time), else None; and "traceback": a failed workflow's
            formatted traceback, its last 8000 characters at most, else None.

        Raises:
            WorkflowNotFound: no workflow has this id.
        """
        check_workflow_id(wf_id)
        with self._lock:
            return describe_on(self.connection(), wf_id)

    def list(
        self, status: str | None = None, name: str | None = None, version: str | None = None, limit: int = 100
    ) -> list[dict]:
        """Workflow rows (no steps), newest first, filtered by status, name and version.

        Args:
            status: one of STATUSES, or None for any.
            limit: at most this many rows, 1 to MAX_LIST_LIMIT.

        Raises:
            InvalidInput: an unknown status, a name or version that is not an id, a bad limit.
        """
        sql, params = list_query(status, name, version, limit)
        with self._lock:
            return self.connection().execute(sql, params).fetchall()

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
        if timeout is not None and not codec.is_seconds(timeout):
            raise InvalidInput("timeout", f"must be a finite number of seconds >= 0, or None, got {timeout!r}")
        if not codec.is_seconds(poll, positive=True):
            raise InvalidInput("poll", f"must be a finite number of seconds > 0, got {poll!r}")

        def read(current: str) -> tuple[dict | None, dict | None]:
            with self._lock:
                return outcome_on(self.connection(), current)

        return wait_result(read, wf_id, timeout, poll)

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
        return self._tx(fork_in, wf_id, at_seq, new_id)

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
        return self._tx(migrate_in, wf_id, to_version)

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
        with self._lock:
            return drain_report_in(self.connection(), name, version)

    def unserved(self) -> builtins.list[dict]:
        """The deployments with due work and no live worker: a workflow a worker would claim
        now (pending or sleeping and available, or running with a lapsed lease) of a (name,
        version) that no worker has refreshed within its staleness bound (3 refresh periods,
        ilr._worker.deployments.DEPLOYMENT_STALE_AFTER). Nothing claims such work until a worker that
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
        retirement = self._tx(retire_in, name, version)
        if retirement is None:
            raise InvalidInput("version", f"{name}@{version} is not deployed")
        return retirement.retired_at

    # -- grants, approvals, receipts (docs/protocol.md §7, §9) --------------------------

    def grant(
        self,
        principal: str,
        action: str,
        max_cents: int | None = None,
        expires_in: float | None = None,
        *,
        by: str,
        grant_id: str | None = None,
    ) -> str:
        """A policy grant (see ilr.grant_in). Returns its id."""

        return self._tx(
            grant_in, principal, action, by=by, max_cents=max_cents, expires_in=expires_in, grant_id=grant_id
        )

    def approve(
        self,
        wf_id: str,
        payload: Any,
        facts_seen: Any,
        *,
        by: str,
        expires_in: float | None = None,
        action: str = "refund",
    ) -> str:
        """Approve the exact payload a waiting workflow proposed (see ilr._ops.grants.approve_in)."""

        return self._tx(approve_in, wf_id, payload, facts_seen, by=by, expires_in=expires_in, action=action)

    def approve_request(self, request_id: str, *, by: str, expires_in: float | None = None) -> dict:
        """Approve an approval request as ``by`` (see ilr.approve_request_in);
        returns the request row (still pending when a second approver is needed)."""
        return self._tx(approve_request_in, request_id, by=by, expires_in=expires_in)

    def reject_request(self, request_id: str, *, by: str, reason: str) -> dict:
        """Reject an approval request (see ilr.reject_request_in)."""
        return self._tx(reject_request_in, request_id, by=by, reason=reason)

    def approval_request(self, request_id: str) -> dict:
        """One approval request row. Raises ApprovalRequestNotFound."""

        return self._tx(get_in, request_id)

    def approval_requests(self, status: str | None = "pending", limit: int = 200) -> builtins.list[dict]:
        """Approval requests with ``status`` (None: any), oldest first."""

        return self._tx(list_in, status, limit)

    def revoke(self, grant_id: str, *, by: str) -> builtins.list[str]:
        """Revoke a grant; returns the effect ids that may still land (see ilr.revoke_in)."""

        return self._tx(revoke_in, grant_id, by=by)

    def ambiguous(self) -> builtins.list[dict]:
        """Effects in state ambiguous, oldest dispatch first, with any reconciliation."""
        with self._lock:
            return self.connection().execute(AMBIGUOUS_SELECT_EFFECTS).fetchall()

    def reconcile(self, effect_id: str, evidence: Any, *, by: str, applied: bool | None) -> dict:
        """Attest what happened to an AMBIGUOUS effect: a signed RECONCILED journal entry (see
        ilr.reconcile_in; this process's signing key signs it).

        ``applied`` has no default: an attestation is recorded once, so what the evidence shows
        (True: it landed, False: it did not, None: unsure) is always said, never assumed.
        """

        return self._tx(reconcile_in, effect_id, evidence, by=by, applied=applied)

    def receipt(self, effect_id: str, public_key=None) -> dict:
        """The receipt bundle of an effect (ilr.receipt_bundle); verify it with ilr.verify_receipt.

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
        completed after catching a Cancelled (see ilr._effects.orphans.recover_orphans).

        Args:
            targets: target name -> target object, for every target the orphans were sent to;
                default the targets registered with ``register_target``. A target built per
                case (the demo's LocalRefunds) must be passed here.

        Returns:
            one report row per orphan (recover_orphans')."""

        return recover_orphans(self._dsn, targets)
