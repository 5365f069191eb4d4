"""WorkflowContext: the ``ctx`` a workflow function receives (docs/protocol.md §4 to §6).

A workflow is a plain function ``f(ctx, input)``, run from the top on every claim; each durable
call takes the next seq and is replayed from its recorded row or runs at the frontier. The class
is composed of one module per concern:

- ``ilr.context_replay``: the replay cursor (seqs, the replay check, frontier checks, suspend);
- ``ilr.context_steps``: ``step``, ``decide`` (``Decision``), ``sleep``, ``wait_signal``;
- ``ilr.context_effects``: ``request_approval`` and ``effect``;
- ``ilr.context_versioning``: ``patched`` and ``deprecate_patch``;
- here: children and continue-as-new (docs/protocol.md §5.3): ``ctx.child``,
  ``ctx.wait_child``, ``ctx.continue_as_new``, and the workflow-level error object.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any, cast

from ilr import _codec as codec
from ilr import _killpoints as killpoints
from ilr import _registry as registry
from ilr._context.effects import EffectCalls
from ilr._context.steps import Decision
from ilr._context.versioning import Versioning
from ilr._db import lineage, store
from ilr._errors import (
    ChildFailed,
    ChildTimeout,
    Fenced,
    HistoryLimitExceeded,
    InvalidInput,
    NonDeterminism,
    SignalTimeout,
    StepFailed,
    Suspend,
)
from ilr._ops.deployments import check_input_shape, resolve_version_on
from ilr._ops.lifecycle import check_parent_close_policy, close_children
from ilr._ops.slots import concurrency_for, queue_for
from ilr._queries.misc import NOW_FROM_DB_SELECT_SQL
from ilr._queries.schedules import SCHEDULED_TIME


class ContinuedAsNew(Suspend):
    """Internal: ``ctx.continue_as_new`` committed; unwinds workflow code like Suspend.

    Attributes:
        successor: the new run's id (``<id>#<n>``).
    """

    def __init__(self, successor: str):
        self.successor = successor
        super().__init__(successor)


class WorkflowContext(EffectCalls, Versioning):
    """The ``ctx`` a workflow function receives. Not thread-safe: one run, one thread.

    Attributes:
        workflow_id, name, version, input, epoch: the claimed workflow.
    """

    # -- children (docs/protocol.md §5.3) ---------------------------------------------------------

    def child(
        self,
        name: str,
        input: Any = None,
        id: str | None = None,
        version: str | None = None,
        parent_close_policy: str = "request_cancel",
    ) -> str:
        """Start a child workflow (Temporal's ``start_child_workflow``; docs/protocol.md §5.3).

        The ``child`` step row and the child's workflow row (``parent_id`` = this workflow) are
        written in one fenced transaction: a crash leaves both or neither. Cancelling this
        workflow requests the cancel of its running children (but "abandon" ones). When this
        workflow completes, fails, is cancelled or terminated, ``parent_close_policy`` says what
        happens to the child if it still runs (docs/protocol.md §5.6). The child's version is
        resolved once, at the frontier, and recorded.

        Args:
            name: the child's workflow name (registered or deployed).
            input: plain JSON; a JSON object unless the child says otherwise. Default {}.
            id: the child's workflow id; default ``"<this id>/<seq>"``.
            version: default the newest unretired deployment of ``name``.
            parent_close_policy: "request_cancel" (default: its cancel is requested, so its
                compensation runs and its pending approval requests are withdrawn; unlike
                Temporal's default, terminate, which would skip both), "terminate", or
                "abandon" (it keeps running).

        A child whose workflow declares a ``Concurrency`` rule (registered in this process)
        takes a slot of its key, or queues for one whatever the rule's ``on_conflict``: its
        parent waits on it.

        Returns:
            the child's workflow id (pass it to ``wait_child``).

        Raises:
            InvalidInput: a bad name, id, input or parent_close_policy; an unknown or retired
                version (field "version"); an id that already exists, under another parent or this one
                (field "id"). Nothing is written.
            Cancelled: a cancel is pending (delivered once).
        """

        if not isinstance(name, str) or not name:
            raise InvalidInput("name", "a child workflow needs a non-empty workflow name")
        check_parent_close_policy(parent_close_policy)
        self.started_children = True
        seq = self._next_seq()
        child_id = f"{self.workflow_id}/{seq}" if id is None else id
        codec.check_workflow_id(child_id, "id")
        # An explicit id is part of the replay check; a default one is not (a fork replays its
        # original's start row, whose default id named the original).
        fingerprint = None if id is None else child_id
        row = self._replay(seq, "child", f"start:{name}", fingerprint)
        if row is not None:
            return row["output"]["child_id"]
        self._frontier(seq, "child", f"start:{name}")
        input = {} if input is None else input
        input_json = codec.dumps(input, "input")
        try:
            resolved = resolve_version_on(self._conn, name, version)
        except LookupError as exc:  # UnknownWorkflow
            raise InvalidInput("version" if version is not None else "name", str(exc)) from None
        check_input_shape(name, resolved, input)
        key, limit, _ = concurrency_for(name, resolved, input)
        queue = queue_for(name, resolved)
        output = {"child_id": child_id, "name": name, "version": resolved}
        store.start_child(
            self._conn,
            self._run,
            seq=seq,
            step_name=f"start:{name}",
            child_id=child_id,
            name=name,
            version=resolved,
            input_json=input_json,
            output_json=codec.dumps(output, "child"),
            fingerprint=fingerprint,
            concurrency_key=key,
            concurrency_limit=limit,
            queue=queue,
            parent_close_policy=parent_close_policy,
        )
        return child_id

    def wait_child(self, id: str, timeout: float | None = None) -> Any:
        """Wait until child ``id`` ends; its result, or its failure raised (docs/protocol.md §5.3).

        Suspends with ``waiting = {seq, kind: "child", child, until}``; the child's terminal
        write wakes this workflow. A child that continued-as-new is followed to the last run of
        its chain. The outcome is recorded as a ``child`` step named ``"wait:<id>"``, so a
        replay returns (or raises) the same thing.

        Args:
            id: a child of this workflow (or, in a fork, of the workflow it was forked from).
            timeout: seconds (database clock), or None to wait forever.

        Returns:
            the child's result.

        Raises:
            ChildFailed: the child ended failed, cancelled or stuck (status and error attached).
            ChildTimeout: ``timeout`` passed first.
            InvalidInput: ``id`` is not a child of this workflow, or a bad timeout; nothing
                is written.
            Cancelled: a cancel is pending (delivered once).
        """

        codec.check_workflow_id(id, "id")
        if timeout is not None and (
            not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout != timeout or timeout < 0
        ):
            raise InvalidInput("timeout", f"timeout must be None or a non-negative number of seconds, got {timeout!r}")
        seq = self._next_seq()
        name = f"wait:{id}"
        row = self._replay(seq, "child", name)
        if row is None:
            self._frontier(seq, "child", name)
            waiting = self._waiting_for(seq, "child")
            until = waiting["until"] if waiting else None
            seconds = None if (until or timeout is None) else float(timeout)
            try:
                outcome = store.wait_child(
                    self._conn, self._run, seq=seq, name=name, child_id=id, until=until, seconds=seconds
                )
            except Suspend:
                self.suspended = True
                killpoints.hit("wait_after_suspend")
                raise
        else:
            outcome = row["output"]
        status = cast(str, outcome.get("status"))  # cast: every outcome store.wait_child records has one
        if status == "completed":
            return outcome.get("result")
        if status == "timeout":
            raise ChildTimeout(outcome.get("child", id), outcome.get("until"))
        raise ChildFailed(outcome.get("child", id), status, outcome.get("error"))

    # -- continue-as-new (docs/protocol.md §5.3, §5.7) ---------------------------------------------

    def _at_history_limit(self, exc: HistoryLimitExceeded) -> None:
        """A workflow registered with ``continue_as_new_at_history_limit=True`` continues as new
        here, with the input this run was started with (``ctx.input``), instead of failing."""
        if not registry.get(self.name, self.version).continue_as_new_at_history_limit:
            return
        successor = lineage.continue_as_new(self._conn, self._run, codec.dumps(self.input, "input"))
        self.suspended = True
        raise ContinuedAsNew(successor)

    def continue_as_new(self, input: Any = None) -> None:
        """End this run as ``continued`` and start its successor ``<id>#<n>`` with ``input``
        (Temporal's ``continue_as_new``; docs/protocol.md §5.3). Never returns.

        One fenced transaction marks this run continued and inserts the successor (same name
        and version, ``continued_from`` = this id, the same parent, a pending cancel carried
        over); a waiting parent is woken to follow the chain. ``rt.result(<first id>)`` follows
        the chain to the last run.

        Args:
            input: plain JSON for the successor (a JSON object unless the workflow says
                otherwise). Default {}.

        Raises:
            InvalidInput: input not plain JSON or not an object; the successor id exists or
                would exceed 200 characters. Nothing is written.
            NonDeterminism: the history holds another call at this seq.
        """

        input = {} if input is None else input
        input_json = codec.dumps(input, "input")
        check_input_shape(self.name, self.version, input)
        seq = self._next_seq()
        row = self._steps.get(seq)
        if row is not None:
            exc = NonDeterminism(
                seq,
                {"kind": row["kind"], "name": row["name"], "fingerprint": row["fingerprint"]},
                {"kind": "continue_as_new", "name": "continue_as_new", "fingerprint": None},
            )
            self.nondeterminism = exc
            raise exc
        self._check_waiting(seq, "continue_as_new", "continue_as_new")
        successor = lineage.continue_as_new(self._conn, self._run, input_json, after=self._close_children())
        self.suspended = True
        raise ContinuedAsNew(successor)

    def _close_children(self):
        """What this run's end does to its children (their parent close policies), for the
        transaction that ends it; None when it started none."""
        if not self.started_children:
            return None
        wf_id = self._run.workflow_id
        return lambda cur: close_children(cur, wf_id, f"$parent:{wf_id}")

    @property
    def scheduled_time(self) -> datetime | None:
        """The tick a schedule started this workflow for, an aware UTC datetime (docs/protocol.md
        §5.8); the same in every run of its continue-as-new chain; None when no schedule started
        it. Read once per run from the tick's record, which never changes: replay-safe."""
        if self._scheduled_time is None:
            root = self._run.workflow_id.split("#", 1)[0]
            row = self._conn.execute(SCHEDULED_TIME, (root,)).fetchone()
            self._scheduled_time = (row["scheduled_at"].astimezone(UTC) if row else None,)
        return self._scheduled_time[0]

    def now_from_db(self) -> str:
        """Not a durable call: the database clock now, for logs only (never branch on it)."""
        return self._conn.execute(NOW_FROM_DB_SELECT_SQL).fetchone()["n"]


def dumps_error(exc: BaseException) -> str:
    """The workflow-level error object, as JSON text."""
    body: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)[:4000]}
    for attr in ("field", "rule", "seq", "recorded", "offered", "step", "attempts"):
        if hasattr(exc, attr):
            body[attr] = getattr(exc, attr)
    if isinstance(exc, StepFailed):
        body["cause_type"] = exc.type
    if isinstance(exc, HistoryLimitExceeded):
        for attr in ("setting", "limit", "figure", "history_length", "history_bytes"):
            body[attr] = getattr(exc, attr)
    if isinstance(exc, (ChildFailed, ChildTimeout)):
        body["child"] = exc.child_id
    if isinstance(exc, SignalTimeout):
        body["signal"] = exc.name
        body["timeout"] = exc.timeout
    if isinstance(exc, ChildFailed):
        body["child_status"] = exc.status
        body["child_error"] = exc.error
    return json.dumps(body, default=str)


def monotonic() -> float:
    return time.monotonic()


__all__ = ["ChildFailed", "ChildTimeout", "ContinuedAsNew", "Decision", "Fenced", "WorkflowContext"]
