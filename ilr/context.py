"""WorkflowContext: the replay cursor and the durable calls (docs/protocol.md §4 to §6).

A workflow is a plain function ``f(ctx, input)``, run from the top on every claim. Each durable
call takes the next seq. With a recorded row at that seq the call is replayed: kind, name and
(where set) fingerprint must match, else NonDeterminism; the recorded output returns (a recorded
failure re-raises). Without a row the call is at the frontier and runs. A call that suspended
(a sleep, a signal wait, a retry backoff, an effect waiting to settle, a child wait) holds its
seq in ``workflows.waiting``: a different call offered at that seq is NonDeterminism too.

Versioning, children and continue-as-new (docs/protocol.md §4, §5.3): ``ctx.patched`` and
``ctx.deprecate_patch``, ``ctx.child`` and ``ctx.wait_child``, ``ctx.continue_as_new``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import psycopg

from ilr import codec, db, killpoints, store
from ilr.effects import EffectCall, EffectRefused
from ilr.errors import (
    Cancelled,
    Fenced,
    InterlockError,
    InvalidInput,
    NonDeterminism,
    SignalTimeout,
    StepFailed,
    Suspend,
)
from ilr.retry import RetryPolicy
from ilr.runtime import check_input_shape, resolve_version_on

MAX_PATCH_ID_LENGTH = 200
MAX_ERROR_MESSAGE = 2000
"""Characters of a failed attempt's message kept (in ``waiting["last_error"]``, the step's error
and the log line)."""

log = logging.getLogger("ilr.steps")

# The waiting kinds a suspended call leaves in workflows.waiting, by the kind of call that left
# it: a call offered at that seq must be of a matching kind (NonDeterminismLoud).
_WAITING_KINDS = {"step": ("retry",), "decide": ("retry",), "sleep": ("sleep",), "signal": ("signal",),
                  "effect": ("effect",), "child": ("child",)}


class ChildFailed(InterlockError):
    """``ctx.wait_child``: the child ended failed, cancelled or stuck (docs/protocol.md §5.3).

    Recorded, so a replay raises it again at the same call.

    Attributes:
        child_id: the child that ended (the last run of its continue-as-new chain).
        status: "failed", "cancelled" or "stuck".
        error: the child's recorded error object ({"type", "message", ...}).
    """

    code = "ILR-014"

    def __init__(self, child_id: str, status: str, error: Any):
        self.child_id = child_id
        self.status = status
        self.error = error
        kind = (error or {}).get("type", "Error") if isinstance(error, dict) else "Error"
        message = (error or {}).get("message", "") if isinstance(error, dict) else str(error)
        super().__init__(f"child workflow {child_id} ended {status}: {kind}: {message}")


class ChildTimeout(InterlockError, TimeoutError):
    """``ctx.wait_child(id, timeout)``: the child had not ended when the timeout passed
    (database clock). Recorded, so a replay raises it again; the child keeps running.

    Attributes:
        child_id: the child waited on (the last run of its chain at the timeout).
    """

    code = "ILR-015"

    def __init__(self, child_id: str, timeout_at: Any = None):
        self.child_id = child_id
        self.timeout_at = timeout_at
        super().__init__(f"child workflow {child_id} had not ended at the wait's timeout ({timeout_at})")


class ContinuedAsNew(Suspend):
    """Internal: ``ctx.continue_as_new`` committed; unwinds workflow code like Suspend.

    Attributes:
        successor: the new run's id (``<id>#<n>``).
    """

    def __init__(self, successor: str):
        self.successor = successor
        super().__init__(successor)


@dataclass(frozen=True)
class Decision:
    """What ``ctx.decide`` returns.

    Attributes:
        output: the model call's response (e.g. {"amount": 2000, "reasoning": ...}).
        premises: the facts captured before the call (what the decision rested on), or None.
        ref: {"workflow_id", "seq", "request_hash"}, to cite the decision in an effect.
        record: the whole recorded step output (model, usage, captured_at, ...).
    """

    output: Any
    premises: Any
    ref: dict
    record: dict


class WorkflowContext:
    """The ``ctx`` a workflow function receives. Not thread-safe: one run, one thread.

    Attributes:
        workflow_id, name, version, input, epoch: the claimed workflow.
    """

    def __init__(self, run, conn, steps: dict[int, dict], reconnect=None):
        """Args: run, the worker's Run; conn, its connection; steps, the recorded step rows by
        seq; reconnect, a callable returning a new connection, with which a connection that
        died while idle (a database restart during a step body) is replaced before the next
        write (None: never replaced)."""
        self._run = run
        self._conn_now = conn
        self._reconnect = reconnect
        self._steps = steps
        self._seq = 0
        self._patches: dict[str, int] = {}
        self._cancel_delivered = False
        self.last_approval: dict | None = None
        self.suspended = False
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
        if self._reconnect is not None and (conn.closed or conn.broken or (
                conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE and not db.usable(conn))):
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
            return None
        if row["kind"] != kind or row["name"] != name or (
            fingerprint is not None and row["fingerprint"] is not None and row["fingerprint"] != fingerprint
        ):
            exc = NonDeterminism(
                seq,
                {"kind": row["kind"], "name": row["name"], "fingerprint": row["fingerprint"]},
                {"kind": kind, "name": name, "fingerprint": fingerprint},
            )
            self.nondeterminism = exc
            raise exc
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

    def _check_waiting(self, seq: int, kind: str, name: str) -> None:
        """NonDeterminismLoud for a suspended call: the call that suspended at ``seq`` left
        ``waiting`` {seq, kind[, name]} and no step row, so a replay offering another call there
        is as non-deterministic as a mismatching row."""
        waiting = self._run.waiting or {}
        if waiting.get("seq") != seq:
            return
        recorded_name = waiting.get("name") or waiting.get("signal")
        if waiting.get("kind") not in _WAITING_KINDS.get(kind, ()) or (
                recorded_name is not None and recorded_name != name):
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

    # -- durable calls -----------------------------------------------------------------------

    def step(self, name: str, fn: Callable[..., Any], *args: Any, retry: RetryPolicy | None = None,
             **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` at least once and record its output (docs/protocol.md §4).

        A crash between ``fn`` returning and the record re-runs ``fn``, exactly like a Temporal
        activity: anything with an external side effect belongs in ``ctx.effect``.

        Args:
            name: the step name (part of the replay check).
            fn: a callable returning plain JSON.
            retry: RetryPolicy; default Temporal's (1s initial, 2.0 backoff, unlimited).

        Returns:
            fn's output, or the recorded output on replay.

        Raises:
            StepFailed: after max_attempts or a non_retryable type (and again on replay).
            InvalidInput: fn is an effect target (has ``apply``), or its output is not plain JSON.
            Cancelled: a cancel is pending (delivered once).
        """
        if hasattr(fn, "apply"):
            raise InvalidInput("fn", f"step {name!r} was given an effect target; use ctx.effect for side effects")
        retry = retry or RetryPolicy()
        seq = self._next_seq()
        row = self._replay(seq, "step", name)
        if row is not None:
            return row["output"]
        self._frontier(seq, "step", name)
        attempt = 1
        waiting = self._waiting_for(seq, "retry")
        if waiting:
            attempt = int(waiting.get("attempt", 1))
            if not self._run.waiting_due:
                # Woken early (a signal, a cancel elsewhere): the backoff survives
                # (docs/protocol.md §4, steps).
                self._suspend(seq=seq, kind="retry", name=name, until=waiting["until"], attempt=attempt,
                              last_error=waiting.get("last_error"))
        self._run.require_local_lease()
        try:
            output = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every step failure is retried or recorded
            self._failed_attempt(seq, "step", name, exc, attempt, retry)
        output_json = codec.dumps(output, f"output of step {name!r}")
        killpoints.hit("step_before_record")
        store.record_step(self._conn, self._run, seq=seq, kind="step", name=name, output_json=output_json)
        killpoints.hit("step_after_record")
        return output

    def _failed_attempt(self, seq: int, kind: str, name: str, exc: Exception, attempt: int,
                        retry: RetryPolicy, fingerprint: str | None = None) -> None:
        """Attempt ``attempt`` of step (or decide) ``name`` raised ``exc``: log it at WARNING
        (logger "ilr.steps"), then suspend for the retry with the error kept durably in
        ``waiting["last_error"]`` {type, message, attempt, at} (what describe(), the admin and
        the case page show), or, with no retry left, record the failure. Never returns.

        Raises:
            Suspend: the retry is scheduled. StepFailed: the failure was recorded.
        """
        error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)[:MAX_ERROR_MESSAGE],
                                 "attempt": attempt}
        what = f"workflow {self.workflow_id}: {kind} {name!r} attempt {attempt} failed: {error['type']}: " \
               f"{error['message']}"
        if retry.retries(exc, attempt):
            delay = retry.interval(attempt)
            log.warning("%s; retry %d in %.3g s", what, attempt + 1, delay)
            self._suspend(seq=seq, kind="retry", name=name, seconds=delay, attempt=attempt + 1, last_error=error)
        log.warning("%s; no retry left, the %s fails", what, kind)
        recorded = {"type": error["type"], "message": error["message"], "attempts": attempt}
        store.record_step(self._conn, self._run, seq=seq, kind=kind, name=name, fingerprint=fingerprint,
                          error_json=codec.dumps(recorded, "error"))
        raise StepFailed(name, recorded["type"], recorded["message"], attempt) from exc

    def decide(self, name: str, call: Callable[[Any], Any], request: Any,
               premises: Callable[[], Any] | None = None, retry: RetryPolicy | None = None) -> Decision:
        """Record a model decision once (docs/protocol.md §4, decisions).

        Order: capture premises (database-clock time), insert an ilr.llm_calls row in
        autocommit, call the model, then record the step with the first writer winning. A
        crash after the call discards the response; the harness counts discarded calls as
        count(llm_calls) - count(decide steps).

        Args:
            call: ``call(request) -> response`` (plain JSON; "model" and "usage" keys are kept).
            request: the plain-JSON request; its sha256 is the step's fingerprint.
            premises: ``premises() -> facts`` read before the call.

        Returns:
            Decision(output=response, premises, ref, record).
        """
        codec.check_plain(request, f"request of decide {name!r}")
        request_hash = codec.sha256_hex(codec.canonical(request))
        seq = self._next_seq()
        row = self._replay(seq, "decide", name, request_hash)
        if row is None:
            self._frontier(seq, "decide", name)
            row = self._decide_at_frontier(seq, name, call, request, request_hash, premises, retry or RetryPolicy())
        out = row["output"]
        return Decision(out["response"], out.get("premises"),
                        {"workflow_id": self.workflow_id, "seq": seq, "request_hash": request_hash}, out)

    def _decide_at_frontier(self, seq, name, call, request, request_hash, premises, retry):
        attempt = 1
        waiting = self._waiting_for(seq, "retry")
        if waiting:
            attempt = int(waiting.get("attempt", 1))
            if not self._run.waiting_due:
                self._suspend(seq=seq, kind="retry", name=name, until=waiting["until"], attempt=attempt,
                              last_error=waiting.get("last_error"))
        captured = premises() if premises else None
        log = self._conn.execute(
            "insert into ilr.llm_calls (workflow_id, seq, epoch, request_hash) values (%s, %s, %s, %s) "
            "returning to_jsonb(started_at) as captured_at",
            (self.workflow_id, seq, self.epoch, request_hash),
        ).fetchone()
        self._run.require_local_lease()
        try:
            response = call(request)
        except Exception as exc:  # noqa: BLE001 - every model-call failure is retried or recorded
            self._failed_attempt(seq, "decide", name, exc, attempt, retry, fingerprint=request_hash)
        killpoints.hit("decide_after_response")
        output = {
            "model": response.get("model") if isinstance(response, dict) else None,
            "request_hash": request_hash,
            "response": response,
            "usage": response.get("usage") if isinstance(response, dict) else None,
            "premises": captured,
            "captured_at": log["captured_at"],
        }
        store.record_step(self._conn, self._run, seq=seq, kind="decide", name=name, fingerprint=request_hash,
                          output_json=codec.dumps(output, f"output of decide {name!r}"))
        return {"output": output}

    def sleep(self, seconds: float) -> None:
        """A durable timer: suspend until database time >= now() + seconds (TimerNotEarly).

        The step records {"until": ...}; ``sleep`` returns None.

        Raises:
            InvalidInput: seconds is negative or not a number.
        """
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds != seconds or seconds < 0:
            raise InvalidInput("seconds", f"sleep needs a non-negative number of seconds, got {seconds!r}")
        seq = self._next_seq()
        if self._replay(seq, "sleep", "sleep") is not None:
            return None
        self._frontier(seq, "sleep", "sleep")
        waiting = self._waiting_for(seq, "sleep")
        until = waiting["until"] if waiting else None
        self._suspend(seq=seq, kind="sleep", name="sleep", until=until, seconds=None if until else float(seconds))
        return None

    def wait_signal(self, name: str, timeout: float | None = None) -> Any:
        """Wait for the next signal ``name`` (Temporal's ``wait_condition``).

        docs/protocol.md §5.1. Each signal row is consumed by exactly one wait
        (SignalExactlyOnceConsumed). The step row records a consumed signal as its payload
        (fingerprint ``signal:<id>``) and a timeout as a SignalTimeout error, so a replay returns or
        raises the same. A row with neither (recorded before this distinction) whose output reads
        None replays as a timeout when the wait has a timeout, as that code read it, and as None
        when it has none.

        Args:
            timeout: seconds (database clock), or None to wait forever (available_at = 'infinity').

        Returns:
            the payload exactly as sent, None included.

        Raises:
            SignalTimeout: ``timeout`` passed with no signal (again on replay).
            InvalidInput: an empty name, or a negative timeout.
            Cancelled: a cancel is pending (delivered once).
        """
        if not isinstance(name, str) or not name:
            raise InvalidInput("name", "wait_signal needs a non-empty signal name")
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                    or timeout != timeout or timeout < 0):
            raise InvalidInput("timeout", f"timeout must be None or a non-negative number of seconds, got {timeout!r}")
        seq = self._next_seq()
        row = self._replay(seq, "signal", name)  # a recorded timeout raises SignalTimeout here
        if row is not None:
            if row["output"] is None and row.get("fingerprint") is None and timeout is not None:
                raise SignalTimeout(name, timeout)  # unmarked: read as the code that wrote it read it
            return row["output"]
        self._frontier(seq, "signal", name)
        waiting = self._waiting_for(seq, "signal")
        until = waiting["until"] if waiting else None
        seconds = None if (until or timeout is None) else float(timeout)
        outcome, payload = self._suspend(seq=seq, kind="signal", name=name, signal=name, until=until,
                                         seconds=seconds, timeout=timeout)
        if outcome == "timeout":
            raise SignalTimeout(name, timeout)
        return payload

    def request_approval(self, target, key: str, payload: Any, *, premises: Any = None, decision: dict | None = None,
                         summary: str = "", timeout: float = 86400.0, action: str | None = None):
        """Ask a person to approve one exact effect and wait for the answer (a durable request
        row, ``ilr.approval_requests``; approved or rejected with ``rt.approve_request`` /
        ``rt.reject_request``, the admin or the review UI).

        Three recorded calls: the request (its row is written in the same fenced transaction),
        the wait on the request's own signal (no lost wakeup, consumed once, a cancel reaches
        it), and the outcome, settled under the request's row lock (an approval and the expiry
        cannot both win). A replay returns the recorded outcome.

        Args:
            target: the effect target (its ``name`` and ``action``, as ``ctx.effect`` reads them) or
                a registered target's name.
            key: the business idempotency key the effect will use.
            payload: plain JSON, exactly what will be sent ({"amount": cents, ...}).
            premises: the facts the decision rested on, or a callable returning them (called
                once, before the request is written); bound into the grant as facts_seen.
            decision: a Decision.ref to show with the request.
            summary: one line for the approvers' queue.
            timeout: seconds until the request expires (database clock).
            action: what the grant covers; default the target's ``action`` ("refund" when it
                declares none, as ``ctx.effect`` assumes).

        Returns:
            an Approval (grant_id, payload, facts_seen, approved_by, ...), or None when the
            request was rejected or expired; ``ctx.last_approval`` then holds the outcome
            {"status", "decided_by", "reason", ...}.

        Raises:
            InvalidInput: a target that is not one (no ``tier`` of 1, 2 or 3 and callable
                ``apply``) or a name no target is registered under, an empty key, a payload not
                plain JSON, premises not a JSON object (or None), a decision not a JSON object
                (or None), a bad amount, a summary over one line, a bad timeout; nothing is
                written.
            Cancelled: the workflow was cancelled while waiting (the request reads cancelled).
        """
        from ilr import approval_requests as ar
        from ilr import targets

        if isinstance(target, str):
            codec.check_text(target, "target", "must be an effect target, or a registered target's name")
            target_name, target = target, targets.get_target(target)
            if target is None:
                raise InvalidInput("target", f"no target is registered under the name {target_name!r} "
                                             f"(ilr.targets.register_target)")
        else:
            targets.check_is_target(target)
            target_name = targets.attr(target, "name")
        codec.check_text(key, "key")
        if premises is not None and not callable(premises) and not isinstance(premises, dict):
            raise InvalidInput("premises", f"must be a JSON object of facts, a callable returning one, or None, "
                                           f"got {type(premises).__name__}")
        if decision is not None and not isinstance(decision, dict):
            raise InvalidInput("decision", f"must be a Decision.ref (a JSON object) or None, got "
                                           f"{type(decision).__name__}")
        # The action ctx.effect will ask the grant to cover (targets.attr's default included).
        action = codec.check_text(action or targets.attr(target, "action"), "action")
        payload_text = codec.dumps(payload, "payload")
        amount = codec.check_cents(payload["amount"], "payload.amount") if isinstance(payload, dict) \
            and "amount" in payload else None
        summary = ar.check_summary(summary)
        if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout != timeout
                or not timeout > 0):
            raise InvalidInput("timeout", f"must be a positive number of seconds, got {timeout!r}")
        name = f"approval_request:{key}"
        seq = self._next_seq()
        row = self._replay(seq, "step", name)
        if row is None:
            self._frontier(seq, "step", name)
            facts = premises() if callable(premises) else premises
            if facts is not None and not isinstance(facts, dict):
                raise InvalidInput("premises", f"the callable must return a JSON object of facts or None, "
                                               f"got {type(facts).__name__}")
            request_id = ar.request_id_for(self.workflow_id, seq)
            output = {"request_id": request_id, "target": target_name, "action": action, "key": key}
            # Two fenced statements: the row, then the step. A crash between them re-runs this
            # call, whose insert finds the row (same id) and writes nothing.
            self._conn.execute(ar.INSERT_SQL, {
                "id": request_id, "wf": self.workflow_id, "epoch": self.epoch, "ttl": self._run.lease_ttl, "seq": seq,
                "target": target_name,
                "action": action, "key": key, "payload": payload_text, "hash": codec.payload_hash(payload),
                "amount": amount, "premises": codec.dumps(facts, "premises"),
                "decision": codec.dumps(decision, "decision"), "summary": summary,
                "needed": ar.approvals_needed(target, target_name, action, amount), "timeout": float(timeout)})
            store.record_step(self._conn, self._run, seq=seq, kind="step", name=name,
                              output_json=codec.dumps(output, "approval request"))
        else:
            output = row["output"]
        request_id = output["request_id"]
        try:
            self.wait_signal(ar.signal_name(request_id), timeout=timeout)
            ended = None
        except SignalTimeout:
            ended = "expired"
        except Cancelled:
            ar.settle_request_in(self._conn, self._run, request_id, "cancelled")
            raise
        name = f"approval_outcome:{key}"
        seq = self._next_seq()
        row = self._replay(seq, "step", name)
        if row is None:
            self._frontier(seq, "step", name)
            # Settle, then record: a crash between re-settles a decided row, which changes nothing.
            req = ar.settle_request_in(self._conn, self._run, request_id, ended)
            outcome = {**ar.outcome_of(req), "payload": req["payload"], "facts_seen": req["premises"]}
            store.record_step(self._conn, self._run, seq=seq, kind="step", name=name,
                              output_json=codec.dumps(outcome, "approval outcome"))
        else:
            outcome = row["output"]
        self.last_approval = outcome
        if outcome["status"] != "approved":
            return None
        return ar.Approval(request_id=request_id, grant_id=outcome["grant_id"], payload=outcome["payload"],
                           facts_seen=outcome["facts_seen"], approved_by=tuple(outcome["approved_by"]),
                           decided_at=outcome["decided_at"])

    def effect(self, target, key: str, payload: Any, premises: Any = None, grant: str | None = None,
               name: str | None = None, local_premises=(), compensation: bool = False,
               raise_on_refusal: bool = False, decision: dict | None = None):
        """A gated effect: sent at most once, only under a live grant, only while the premises
        hold, with a sealed journal (docs/protocol.md §6).

        Args:
            target: an EffectTarget (tier, apply; see ilr.targets).
            key: the business idempotency key; effect_id = "eff_" + sha256({"request_id": key})[:32].
            payload: plain JSON, bound at the first proposal ({"amount": cents, ...}).
            premises: the facts the decision rested on (e.g. an approval's facts_seen); checked
                with target.validate_premises before every send and resend.
            grant: the grant id authorizing the send (a policy grant or an approval).
            name: the step name; default "effect:<target name>".
            local_premises: callables ``f(cur) -> [violation strings]`` run inside T_dispatch,
                under its locks: ``cur.execute(sql, params)`` returns a result whose
                ``fetchone()`` / ``fetchall()`` give dict rows (an ``ilr.batch.Batch``; each
                first read costs a round trip). Parameters go as text typed by the statement:
                cast one the statement does not type (``%s::int``). Use ``cur``, not the
                workflow's connection, which the transaction holds.
            compensation: allowed after a cancel (NoSendAfterCancel exempts it).
            raise_on_refusal: raise EffectRefused instead of returning a REFUSED result.
            decision: a Decision.ref to cite in PROPOSED.

        Returns:
            EffectResult(status, effect_id, result); IN_FLIGHT never returns (the workflow
            suspends until recovery may act).

        Raises:
            InvalidInput: an empty key, a payload or premises not plain JSON, a negative or
                non-integer amount; nothing is written or sent.
            EffectRefused: with raise_on_refusal, for any REFUSED status.
        """

        result = EffectCall(self, target, key, payload, premises, grant, name, local_premises, compensation,
                            decision).execute()
        if raise_on_refusal and result.refused:
            raise EffectRefused(result)
        return result

    # -- versioning (docs/protocol.md §4) ---------------------------------------------------------

    def _check_patch_id(self, patch_id: Any, call: str) -> int:
        if not isinstance(patch_id, str) or not patch_id.strip():
            raise InvalidInput("patch_id", f"{call} needs a non-empty patch id string, got {patch_id!r}")
        if len(patch_id) > MAX_PATCH_ID_LENGTH:
            raise InvalidInput("patch_id", f"a patch id is at most {MAX_PATCH_ID_LENGTH} characters")
        seq = self._seq + 1
        first = self._patches.get(patch_id)
        if first is not None:
            raise InvalidInput("patch_id", f"patch {patch_id!r} is used at two places in workflow {self.name}@"
                                           f"{self.version} (first at seq {first}, again at seq {seq}); a patch id "
                                           f"marks exactly one change: give each place its own id")
        self._patches[patch_id] = seq
        return seq

    def patched(self, patch_id: str) -> bool:
        """Temporal's ``workflow.patched``: branch new code without breaking old histories
        (docs/protocol.md §4, patches).

        Write ``if ctx.patched("add-check"): <new code> else: <old code>``. At the frontier (a
        run that has not got this far before) it records a ``patch`` step row and returns True.
        In replay it returns True when the row at this seq is this patch (the history took the
        new branch), and False without consuming a seq otherwise: the row there belongs to the
        old code's next call, or the old code suspended at this seq (``waiting``). A call that
        suspended never wrote its row, so a history sleeping at this point replays down the old
        branch too.

        Retiring a patch (Temporal's ``deprecate_patch``), in three deployments:
          1. ``if ctx.patched(id): new else: old`` while histories from before the patch may be
             open;
          2. once ``rt.drain_report()`` / ``rt.list`` show none of those is open, replace the
             branch with ``ctx.deprecate_patch(id)`` followed by the new code alone: histories
             that recorded the patch replay, new runs record nothing;
          3. once no open history holds the patch row, delete the ``deprecate_patch`` line.
        Each step changes the module source, so deploy it with ``--allow-code-change`` (the
        patch is what makes the change safe to replay).

        Args:
            patch_id: a non-empty string (at most 200 characters), used at one place only.

        Returns:
            True to run the new code, False to run the old code.

        Raises:
            InvalidInput: an empty or over-long id, or an id already checked at another place
                in this workflow (field "patch_id"); nothing is recorded.
        """
        seq = self._check_patch_id(patch_id, "patched")
        row = self._steps.get(seq)
        if row is not None:
            if row["kind"] == "patch" and row["name"] == patch_id:
                self._seq = seq
                return True
            return False
        waiting = self._run.waiting or {}
        if waiting.get("seq") == seq:
            return False  # the old code suspended here: its history predates the patch
        store.record_step(self._conn, self._run, seq=seq, kind="patch", name=patch_id)
        self._steps[seq] = {"seq": seq, "kind": "patch", "name": patch_id, "fingerprint": None, "output": None,
                            "error": None}
        self._seq = seq
        return True

    def deprecate_patch(self, patch_id: str) -> None:
        """Temporal's ``workflow.deprecate_patch``: the second step of retiring a patch (see
        ``patched``). Consumes the ``patch`` row of ``patch_id`` when the history has one at
        this seq, records nothing at the frontier, and returns None.

        Raises:
            InvalidInput: as ``patched`` (field "patch_id").
        """
        seq = self._check_patch_id(patch_id, "deprecate_patch")
        row = self._steps.get(seq)
        if row is not None and row["kind"] == "patch" and row["name"] == patch_id:
            self._seq = seq

    # -- children (docs/protocol.md §5.3) ---------------------------------------------------------

    def child(self, name: str, input: Any = None, id: str | None = None, version: str | None = None) -> str:
        """Start a child workflow (Temporal's ``start_child_workflow``; docs/protocol.md §5.3).

        The ``child`` step row and the child's workflow row (``parent_id`` = this workflow) are
        written in one fenced transaction: a crash leaves both or neither. Cancelling this
        workflow cancels its running children; a child that outlives a parent that completed
        keeps running (Temporal's ParentClosePolicy ABANDON). The child's version is resolved
        once, at the frontier, and recorded.

        Args:
            name: the child's workflow name (registered or deployed).
            input: plain JSON; a JSON object unless the child says otherwise. Default {}.
            id: the child's workflow id; default ``"<this id>/<seq>"``.
            version: default the newest unretired deployment of ``name``.

        Returns:
            the child's workflow id (pass it to ``wait_child``).

        Raises:
            InvalidInput: a bad name, id or input; an unknown or retired version (field
                "version"); an id that already exists, under another parent or this one
                (field "id"). Nothing is written.
            Cancelled: a cancel is pending (delivered once).
        """

        if not isinstance(name, str) or not name:
            raise InvalidInput("name", "a child workflow needs a non-empty workflow name")
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
        output = {"child_id": child_id, "name": name, "version": resolved}
        store.start_child(self._conn, self._run, seq=seq, step_name=f"start:{name}", child_id=child_id,
                          name=name, version=resolved, input_json=input_json,
                          output_json=codec.dumps(output, "child"), fingerprint=fingerprint)
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
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                    or timeout != timeout or timeout < 0):
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
                outcome = store.wait_child(self._conn, self._run, seq=seq, name=name, child_id=id, until=until,
                                           seconds=seconds)
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

    # -- continue-as-new (docs/protocol.md §5.3) --------------------------------------------------

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
            exc = NonDeterminism(seq, {"kind": row["kind"], "name": row["name"], "fingerprint": row["fingerprint"]},
                                 {"kind": "continue_as_new", "name": "continue_as_new", "fingerprint": None})
            self.nondeterminism = exc
            raise exc
        self._check_waiting(seq, "continue_as_new", "continue_as_new")
        successor = store.continue_as_new(self._conn, self._run, input_json)
        self.suspended = True
        raise ContinuedAsNew(successor)

    def now_from_db(self) -> str:
        """Not a durable call: the database clock now, for logs only (never branch on it)."""
        return self._conn.execute("select to_jsonb(now()) as n").fetchone()["n"]


def dumps_error(exc: BaseException) -> str:
    """The workflow-level error object, as JSON text."""
    body: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)[:4000]}
    for attr in ("field", "rule", "seq", "recorded", "offered", "step", "attempts"):
        if hasattr(exc, attr):
            body[attr] = getattr(exc, attr)
    if isinstance(exc, StepFailed):
        body["cause_type"] = exc.type
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
