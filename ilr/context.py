"""WorkflowContext: the replay cursor and the durable calls (spec §5.1, §5.5, §5.6).

A workflow is a plain function ``f(ctx, input)``, run from the top on every claim. Each durable
call takes the next seq. With a recorded row at that seq the call is replayed: kind, name and
(where set) fingerprint must match, else NonDeterminism; the recorded output returns (a recorded
failure re-raises). Without a row the call is at the frontier and runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from ilr import codec, killpoints, store
from ilr.errors import Cancelled, Fenced, InvalidInput, NonDeterminism, StepFailed, Suspend
from ilr.retry import RetryPolicy


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

    def __init__(self, run, conn, steps: dict[int, dict]):
        self._run = run
        self._conn = conn
        self._steps = steps
        self._seq = 0
        self._cancel_delivered = False
        self.suspended = False
        self.nondeterminism: NonDeterminism | None = None
        self.workflow_id = run.workflow_id
        self.name = run.name
        self.version = run.version
        self.input = run.input
        self.epoch = run.epoch

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
            raise StepFailed(name, error.get("type", "Error"), error.get("message", ""), error.get("attempts", 1))
        return row

    def _frontier(self, seq: int, kind: str, name: str) -> None:
        """Checks at every call that runs for the first time: deliver a pending cancel once."""
        if self._run.cancel_requested and not self._cancel_delivered:
            # Record where the cancel was delivered, so a replay raises it at the same call
            # (spec §13.3.4: Cancelled is raised once, at the first frontier call).
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
        """Run ``fn(*args, **kwargs)`` at least once and record its output (spec §5.5).

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
                # Woken early (a signal, a cancel elsewhere): the backoff survives (spec §13.3.5).
                self._suspend(seq=seq, kind="retry", name=name, until=waiting["until"], attempt=attempt)
        self._run.require_local_lease()
        try:
            output = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - every step failure is retried or recorded
            if retry.retries(exc, attempt):
                self._suspend(seq=seq, kind="retry", name=name, seconds=retry.interval(attempt), attempt=attempt + 1)
            error = {"type": type(exc).__name__, "message": str(exc)[:2000], "attempts": attempt}
            store.record_step(self._conn, self._run, seq=seq, kind="step", name=name,
                              error_json=codec.dumps(error, "error"))
            raise StepFailed(name, error["type"], error["message"], attempt) from exc
        output_json = codec.dumps(output, f"output of step {name!r}")
        killpoints.hit("step_before_record")
        store.record_step(self._conn, self._run, seq=seq, kind="step", name=name, output_json=output_json)
        killpoints.hit("step_after_record")
        return output

    def decide(self, name: str, call: Callable[[Any], Any], request: Any,
               premises: Callable[[], Any] | None = None, retry: RetryPolicy | None = None) -> Decision:
        """Record a model decision once (spec §5.5).

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
                self._suspend(seq=seq, kind="retry", name=name, until=waiting["until"], attempt=attempt)
        captured = premises() if premises else None
        log = self._conn.execute(
            "insert into ilr.llm_calls (workflow_id, seq, epoch, request_hash) values (%s, %s, %s, %s) "
            "returning to_jsonb(started_at) as captured_at",
            (self.workflow_id, seq, self.epoch, request_hash),
        ).fetchone()
        self._run.require_local_lease()
        try:
            response = call(request)
        except Exception as exc:  # noqa: BLE001
            if retry.retries(exc, attempt):
                self._suspend(seq=seq, kind="retry", name=name, seconds=retry.interval(attempt), attempt=attempt + 1)
            error = {"type": type(exc).__name__, "message": str(exc)[:2000], "attempts": attempt}
            store.record_step(self._conn, self._run, seq=seq, kind="decide", name=name,
                              fingerprint=request_hash, error_json=codec.dumps(error, "error"))
            raise StepFailed(name, error["type"], error["message"], attempt) from exc
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
        """Wait for the next signal ``name``; its payload, or None at the timeout (spec §5.6).

        Each signal row is consumed by exactly one wait (SignalExactlyOnceConsumed).

        Args:
            timeout: seconds, or None to wait forever (available_at = 'infinity').

        Raises:
            InvalidInput: an empty name, or a negative timeout.
        """
        if not isinstance(name, str) or not name:
            raise InvalidInput("name", "wait_signal needs a non-empty signal name")
        if timeout is not None and (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
                                    or timeout != timeout or timeout < 0):
            raise InvalidInput("timeout", f"timeout must be None or a non-negative number of seconds, got {timeout!r}")
        seq = self._next_seq()
        row = self._replay(seq, "signal", name)
        if row is not None:
            return row["output"]
        self._frontier(seq, "signal", name)
        waiting = self._waiting_for(seq, "signal")
        until = waiting["until"] if waiting else None
        seconds = None if (until or timeout is None) else float(timeout)
        _, payload = self._suspend(seq=seq, kind="signal", name=name, signal=name, until=until, seconds=seconds)
        return payload

    def effect(self, target, key: str, payload: Any, premises: Any = None, grant: str | None = None,
               name: str | None = None, local_premises=(), compensation: bool = False,
               raise_on_refusal: bool = False, decision: dict | None = None):
        """A gated effect: sent at most once, only under a live grant, only while the premises
        hold, with a sealed journal (spec §5.7).

        Args:
            target: an EffectTarget (tier, apply; see ilr.targets).
            key: the business idempotency key; effect_id = "eff_" + sha256({"request_id": key})[:32].
            payload: plain JSON, bound at the first proposal ({"amount": cents, ...}).
            premises: the facts the decision rested on (e.g. an approval's facts_seen); checked
                with target.validate_premises before every send and resend.
            grant: the grant id authorizing the send (a policy grant or an approval).
            name: the step name; default "effect:<target name>".
            local_premises: callables ``f(cursor) -> [violation]`` run inside T_dispatch.
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
        from ilr.effects import EffectCall, EffectRefused

        result = EffectCall(self, target, key, payload, premises, grant, name, local_premises, compensation,
                            decision).execute()
        if raise_on_refusal and result.refused:
            raise EffectRefused(result)
        return result

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
    return json.dumps(body, default=str)


def monotonic() -> float:
    return time.monotonic()


__all__ = ["WorkflowContext", "Decision", "Fenced"]
