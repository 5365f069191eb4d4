"""Steps, decisions, timers and signal waits: the durable calls of ``WorkflowContext`` that
run a body or wait (docs/protocol.md §4, §5.1).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ilr import _codec as codec
from ilr import _killpoints as killpoints
from ilr._context.replay import ReplayCursor
from ilr._db import store
from ilr._errors import InvalidInput, SignalTimeout, StepFailed
from ilr._queries.steps import DECIDE_AT_FRONTIER_INSERT_LLM_CALLS
from ilr._retry import RetryPolicy
from ilr._telemetry import hooks

MAX_ERROR_MESSAGE = 2000
"""Characters of a failed attempt's message kept (in ``waiting["last_error"]``, the step's error
and the log line)."""

log = logging.getLogger("ilr.steps")


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


class StepCalls(ReplayCursor):
    """``ctx.step``, ``ctx.decide``, ``ctx.sleep`` and ``ctx.wait_signal``."""

    def step(
        self, name: str, fn: Callable[..., Any], *args: Any, retry: RetryPolicy | None = None, **kwargs: Any
    ) -> Any:
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
                self._suspend(
                    seq=seq,
                    kind="retry",
                    name=name,
                    until=waiting["until"],
                    attempt=attempt,
                    last_error=waiting.get("last_error"),
                )
        with hooks.step(self._run, seq, "step", name, attempt) if hooks.on else hooks.NULL:
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

    def _begin_unrecorded(self, name: str) -> bool:
        """Whether the next call, a step ``name``, runs for the first time now; if so, its
        frontier checks pass (a pending cancel is delivered there) and the local lease holds.

        For a step whose success ends the workflow at once (a Django task's attempt,
        ``ilr._tasks.workflow``): the caller runs the body itself and returns its output as the
        workflow's result, so the finish is the only record of it, one commit fewer. A crash or
        a lost claim before the finish re-runs the body, as a step's crash before its record
        does. A failure is recorded with ``ctx.step`` at the same seq (the seq is not taken here).

        Raises:
            Cancelled: a cancel is pending. Fenced: the local lease ran out.
        """
        seq = self._seq + 1
        if seq in self._steps:
            return False
        self._history_gate()
        self._frontier(seq, "step", name)
        self._run.require_local_lease()
        return True

    def _failed_attempt(
        self,
        seq: int,
        kind: str,
        name: str,
        exc: Exception,
        attempt: int,
        retry: RetryPolicy,
        fingerprint: str | None = None,
    ) -> None:
        """Attempt ``attempt`` of step (or decide) ``name`` raised ``exc``: log it at WARNING
        (logger "ilr.steps"), then suspend for the retry with the error kept durably in
        ``waiting["last_error"]`` {type, message, attempt, at} (what describe(), the admin and
        the case page show), or, with no retry left, record the failure. Never returns.

        Raises:
            Suspend: the retry is scheduled. StepFailed: the failure was recorded.
        """
        error: dict[str, Any] = {
            "type": type(exc).__name__,
            "message": str(exc)[:MAX_ERROR_MESSAGE],
            "attempt": attempt,
        }
        what = (
            f"workflow {self.workflow_id}: {kind} {name!r} attempt {attempt} failed: {error['type']}: "
            f"{error['message']}"
        )
        if retry.retries(exc, attempt):
            delay = retry.interval(attempt)
            log.warning("%s; retry %d in %.3g s", what, attempt + 1, delay)
            self._suspend(seq=seq, kind="retry", name=name, seconds=delay, attempt=attempt + 1, last_error=error)
        log.warning("%s; no retry left, the %s fails", what, kind)
        recorded = {"type": error["type"], "message": error["message"], "attempts": attempt}
        store.record_step(
            self._conn,
            self._run,
            seq=seq,
            kind=kind,
            name=name,
            fingerprint=fingerprint,
            error_json=codec.dumps(recorded, "error"),
        )
        raise StepFailed(name, recorded["type"], recorded["message"], attempt) from exc

    def decide(
        self,
        name: str,
        call: Callable[[Any], Any],
        request: Any,
        premises: Callable[[], Any] | None = None,
        retry: RetryPolicy | None = None,
    ) -> Decision:
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
            args = (seq, name, call, request, request_hash, premises, retry or RetryPolicy())
            if hooks.on:
                attempt = int((self._waiting_for(seq, "retry") or {}).get("attempt", 1))
                with hooks.step(self._run, seq, "decide", name, attempt):
                    row = self._decide_at_frontier(*args)
            else:
                row = self._decide_at_frontier(*args)
        out = row["output"]
        return Decision(
            out["response"],
            out.get("premises"),
            {"workflow_id": self.workflow_id, "seq": seq, "request_hash": request_hash},
            out,
        )

    def _decide_at_frontier(self, seq, name, call, request, request_hash, premises, retry):
        attempt = 1
        waiting = self._waiting_for(seq, "retry")
        if waiting:
            attempt = int(waiting.get("attempt", 1))
            if not self._run.waiting_due:
                self._suspend(
                    seq=seq,
                    kind="retry",
                    name=name,
                    until=waiting["until"],
                    attempt=attempt,
                    last_error=waiting.get("last_error"),
                )
        captured = premises() if premises else None
        log = self._conn.execute(
            DECIDE_AT_FRONTIER_INSERT_LLM_CALLS,
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
        store.record_step(
            self._conn,
            self._run,
            seq=seq,
            kind="decide",
            name=name,
            fingerprint=request_hash,
            output_json=codec.dumps(output, f"output of decide {name!r}"),
        )
        return {"output": output}

    def sleep(self, seconds: float) -> None:
        """A durable timer: suspend until database time >= now() + seconds (TimerNotEarly).

        The step records {"until": ...}; ``sleep`` returns None.

        Raises:
            InvalidInput: seconds is negative or not a number.
        """
        if not codec.is_seconds(seconds, allow_infinite=True):
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
        if timeout is not None and not codec.is_seconds(timeout, allow_infinite=True):
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
        outcome, payload = self._suspend(
            seq=seq, kind="signal", name=name, signal=name, until=until, seconds=seconds, timeout=timeout
        )
        if outcome == "timeout":
            raise SignalTimeout(name, timeout)
        return payload
