"""The replay cursor under ``WorkflowContext`` (docs/protocol.md §4): seqs, the replay check of
a recorded row, the frontier checks (a suspended call, a pending cancel), and suspending.

Every durable call takes the next seq. With a recorded row at that seq the call is replayed:
kind, name and (where set) fingerprint must match, else NonDeterminism; the recorded output
returns (a recorded failure re-raises). Without a row the call is at the frontier and runs. A
call that suspended holds its seq in ``workflows.waiting``: a different call offered at that
seq is NonDeterminism too.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ilr import _codec as codec
from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr._context.history import History
from ilr._db import store
from ilr._errors import Cancelled, HistoryLimitExceeded, NonDeterminism, SignalTimeout, StepFailed, Suspend

# The waiting kinds a suspended call leaves in workflows.waiting, by the kind of call that left
# it: a call offered at that seq must be of a matching kind (NonDeterminismLoud).
_WAITING_KINDS = {
    "step": ("retry",),
    "decide": ("retry",),
    "sleep": ("sleep",),
    "signal": ("signal",),
    "effect": ("effect",),
    "child": ("child",),
    "lock": ("lock",),
}


class ReplayCursor:
    """The state of one run of workflow code and the checks every durable call makes; the base
    of ``WorkflowContext`` (ilr.context) and of its durable-call mixins."""

    def __init__(self, run, conn, steps: dict[int, dict] | None, reconnect=None):
        """Args: run, the worker's Run; conn, its connection; steps, the step rows the claim
        read by seq (seqs 1 to CLAIM_PRELOAD_SEQS), or None (the history is read in pages from
        the first); reconnect, a callable returning a new connection, with which a connection
        that died while idle (a database restart during a step body) is replaced before the
        next write (None: never replaced)."""
        self._run = run
        self._conn_now = conn
        self._reconnect = reconnect
        self._steps = History(lambda: self._conn, run.workflow_id, steps)
        run.history = self._steps  # the writes of _db.store count the rows this run records
        self.history_limit_error: HistoryLimitExceeded | None = None
        self._seq = 0
        self._patches: dict[str, int] = {}
        self._cancel_delivered = False
        self.last_approval: dict | None = None
        self.suspended = False
        self.started_children = False  # a child step ran or replayed: the end applies their policies
        self._held_locks: list[str] = []  # the ctx.lock blocks the code is inside, innermost last
        self._scheduled_time: tuple | None = None  # (ctx.scheduled_time,) once read
        self.nondeterminism: NonDeterminism | None = None
        self.workflow_id = run.workflow_id
        self.name = run.name
        self.version = run.version
        self.input = run.input
        self.epoch = run.epoch

    @property
    def _conn(self):
        """The run's connection for its next statement; replaced when it died while idle.

        Only an idle connection is checked (``db.usable``: no round trip): one inside a
        transaction belongs to that transaction, which must fail as it is. A replacement
        changes nothing the fence relies on: every write fences on (id, epoch) and the lease
        in the row, not on the session, so the next write on a new session is the same write.
        """
        conn = self._conn_now
        if self._reconnect is not None and (
            conn.closed
            or conn.broken
            or (conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and not db.usable(conn))
        ):
            db.discard(conn)
            conn = self._conn_now = self._reconnect()
        return conn

    # -- replay cursor ---------------------------------------------------------------------

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _replay(self, seq: int, kind: str, name: str, fingerprint: str | None = None) -> dict | None:
        """The recorded row at ``seq``, checked against the call offered now (NonDeterminismLoud)."""
        row = self._steps.get(seq)
        if row is None:
            self._history_gate()
            return None
        if (
            row["kind"] != kind
            or row["name"] != name
            or (fingerprint is not None and row["fingerprint"] is not None and row["fingerprint"] != fingerprint)
        ):
            exc = NonDeterminism(
                seq,
                {"kind": row["kind"], "name": row["name"], "fingerprint": row["fingerprint"]},
                {"kind": kind, "name": name, "fingerprint": fingerprint},
            )
            self.nondeterminism = exc
            raise exc
        self._steps.replayed(row)
        error = row.get("error")
        if error:
            if error.get("type") == "Cancelled":
                # The cancel was delivered here in the original run; deliver it again, the same way.
                self._cancel_delivered = True
                raise Cancelled(error.get("message", "workflow cancelled"))
            if kind == "signal" and error.get("type") == "SignalTimeout":
                raise SignalTimeout(name, error.get("timeout"))
            raise StepFailed(name, error.get("type", "Error"), error.get("message", ""), error.get("attempts", 1))
        return row

    # -- the history's size (docs/protocol.md §5.7) ---------------------------------------------

    @property
    def history_length(self) -> int:
        """The step rows of this run's history so far: those replayed and those recorded, up to
        the current call (Temporal's ``workflow.info().get_current_history_length()``); the same
        at the same call in every replay."""
        return self._steps.length

    @property
    def history_bytes(self) -> int:
        """The bytes of those rows' payloads: each output and error as UTF-8 JSON text
        (``json.dumps(value, ensure_ascii=False)``), summed; names, kinds and fingerprints are
        not counted. The same at the same call in every replay."""
        return self._steps.bytes

    @property
    def continue_as_new_suggested(self) -> bool:
        """True once ``history_length`` passes ILR_HISTORY_WARN_STEPS or ``history_bytes``
        passes ILR_HISTORY_WARN_BYTES (Temporal's ``is_continue_as_new_suggested()``): call
        ``ctx.continue_as_new`` at a point where the state fits in its input."""
        return self._steps.continue_as_new_suggested

    def _history_gate(self) -> None:
        """At a call that runs for the first time: past a history limit, the call does not run.
        The figures are the history's, so a replay reaches the limit at the same call."""
        if self.history_limit_error is None:
            exc = self._steps.limit_exceeded()
            if exc is None:
                return
            self._at_history_limit(exc)
            self.history_limit_error = exc
        raise self.history_limit_error

    def _at_history_limit(self, exc: HistoryLimitExceeded) -> None:
        """What a workflow that opted in does at the limit instead of failing (WorkflowContext)."""

    def _check_waiting(self, seq: int, kind: str, name: str) -> None:
        """NonDeterminismLoud for a suspended call: the call that suspended at ``seq`` left
        ``waiting`` {seq, kind[, name]} and no step row, so a replay offering another call there
        is as non-deterministic as a mismatching row."""
        waiting = self._run.waiting or {}
        if waiting.get("seq") != seq:
            return
        recorded_name = waiting.get("name") or waiting.get("signal")
        if waiting.get("kind") not in _WAITING_KINDS.get(kind, ()) or (
            recorded_name is not None and recorded_name != name
        ):
            exc = NonDeterminism(
                seq,
                {"kind": waiting.get("kind"), "name": recorded_name, "suspended": True},
                {"kind": kind, "name": name, "fingerprint": None},
            )
            self.nondeterminism = exc
            raise exc

    def _frontier(self, seq: int, kind: str, name: str) -> None:
        """Checks at every call that runs for the first time: a call that suspended at this seq
        must be the same call (NonDeterminism otherwise); deliver a pending cancel once."""
        self._check_waiting(seq, kind, name)
        if self._run.cancel_requested and not self._cancel_delivered:
            # Record where the cancel was delivered, so a replay raises it at the same call
            # (Cancelled is raised once, at the first frontier call: docs/protocol.md §5.2).
            err = codec.dumps({"type": "Cancelled", "message": "workflow cancelled"}, "error")
            store.record_step(self._conn, self._run, seq=seq, kind=kind, name=name, error_json=err)
            self._cancel_delivered = True
            raise Cancelled("workflow cancelled")

    def _waiting_for(self, seq: int, kind: str) -> dict | None:
        waiting = self._run.waiting
        if waiting and waiting.get("seq") == seq and waiting.get("kind") == kind:
            return waiting
        return None

    def _suspend(self, **kw) -> tuple[str, Any]:
        try:
            return store.suspend(self._conn, self._run, **kw)
        except Suspend:
            self.suspended = True
            killpoints.hit("wait_after_suspend")
            raise

    @property
    def cancelled(self) -> bool:
        """True once a cancel was requested and seen by this run."""
        return self._run.cancel_requested
