"""The send of a gated effect and what follows it (docs/protocol.md §6.3, §6.4): the send under
the watchdog, T_commit with the response log, the late-result compare-and-set of a fenced-out
sender, and a definite refusal by the target: of a first send, or of a tier-1 resend (§6.6).

``send`` is the step the submit path (``ilr._effects.dispatch.submit``) and recovery
(``ilr._effects.recovery.recover``) both end with; the rest of this module is its own.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import psycopg

from ilr import _codec as codec
from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr._context.steps import MAX_ERROR_MESSAGE
from ilr._db.batch import Batch
from ilr._effects.call_state import (
    EffectCallState,
    entry_ts,
    record_step,
    release_until,
    resolve,
    suspend_until_settled,
    written_by,
)
from ilr._effects.result import EffectResult
from ilr._errors import Fenced, LookupFailed, SendInProgress, TargetRejected
from ilr._journal import journal
from ilr._journal.history import IDEMPOTENT_RESEND_VIA
from ilr._queries.effects import (
    COMMITTED_BY_US_SELECT_EFFECTS,
    FAILED_SEND_WAITING_SQL,
    LATE_RESULT_INSERT_EFFECTS,
    LATE_RESULT_LOCK_EFFECTS,
    LATE_RESULT_UPDATE_EFFECTS,
    REFUSE_AFTER_SEND_LOCK_EFFECTS,
    REFUSE_AFTER_SEND_UPDATE_EFFECTS,
    RESOLVE_REJECTED_RESEND_LOCK_EFFECTS,
    SUSPEND_AFTER_FAILED_SEND_SELECT_EFFECTS,
    SUSPEND_AFTER_FAILED_SEND_SELECT_EFFECTS_2,
    SUSPEND_AFTER_FAILED_SEND_UPDATE_EFFECTS,
    T_DISPATCH_UPDATE_EFFECTS_2,
)
from ilr._queries.journal import LAST_HASH_SQL
from ilr._queries.steps import RESPONSE_LOG_WITH_RESPONSES
from ilr._telemetry import hooks
from ilr._worker.watchdog import Watchdog

# The effect protocol's one logger, whichever module of it writes.
log = logging.getLogger("ilr.effects")


def _accepts_timeout(apply: Callable) -> bool:
    """Whether a target's apply() takes a ``timeout`` keyword (seconds left before the local
    deadline); see EffectTarget. Read once per function, not on every send."""
    fn = getattr(apply, "__func__", apply)
    try:
        return _takes_timeout(fn)
    except TypeError:  # an unhashable callable: read its signature each time
        return _takes_timeout.__wrapped__(fn)


@functools.lru_cache(maxsize=256)
def _takes_timeout(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "timeout" in params


def send(
    call: EffectCallState,
    t0: float,
    *,
    via: str,
    status: str,
    rechecked: dict | None,
    payload: Any,
    take_status: bool = True,
) -> EffectResult | None:
    """Send ``payload`` and commit the answer (the shape: ``ilr/_effects/effects.py``). None only when
    the target rejected an idempotent resend and the effect was resolved meanwhile
    (``_resolve_rejected_resend``: the caller goes round).

    A recovery passes the payload of the DISPATCHED entry: the bytes bound to the key at the
    first PROPOSED, whatever this replay offers (PayloadBound).
    """
    remaining = call.send_timeout - (time.monotonic() - t0)
    if remaining <= 0:
        # The local deadline passed before a byte left: skip the send; recovery resolves it.
        suspend_until_settled(call)
    call.run.require_local_lease()
    try:
        with hooks.phase(call, "send"), Watchdog(remaining, call.effect_id):
            result = codec.bound_answer(call.target.apply(call.effect_id, payload, **_timeout_kwargs(call, remaining)))
    except TargetRejected as exc:
        if via == IDEMPOTENT_RESEND_VIA:
            return _resolve_rejected_resend(call, str(exc), payload, rechecked, take_status)
        return _refuse_after_send(call, str(exc), take_status)
    except Exception as exc:  # noqa: BLE001 - timeout, reset, 5xx, in progress: the outcome is unknown
        # (g) no journal entry; no immediate lookup or resend: record the answer on the
        # effect row and wait until send_deadline + settle_margin and the resend policy's
        # next attempt, and let recovery decide (the fix for timeout-then-lookup duplicates).
        log.warning("send of %s failed with an unknown outcome: %s", call.effect_id, exc)
        _suspend_after_failed_send(call, exc)
    # Seconds from the stopwatch start to the answer, on the local monotonic clock: a late
    # result's arrival is judged by this, not by when a fenced-out sender got to journal it.
    call.received_in = time.monotonic() - t0
    killpoints.hit("effect_after_send" if via == "first-send" else "resolve_after_send")
    return _t_commit(call, result, via=via, status=status, rechecked=rechecked, take_status=take_status)


def _suspend_after_failed_send(call: EffectCallState, exc: Exception) -> None:
    """Record a send's unknown outcome and release the workflow until recovery may act
    (docs/protocol.md §6.5): ``effects.last_error`` and ``next_attempt_at`` (the resend
    policy's interval after this send, never before send_deadline + settle_margin), and
    the same error in ``waiting.last_error`` for describe() and the review UI.

    ``last_error = {type, message, send, at (database clock), in_progress, repeated,
    unanswered}``:
    ``repeated`` when this send failed with the same error as the send before it;
    ``unanswered`` counts failed sends in a row (SendInProgress answers not counted). A
    repeated error, ``lookup_after`` unanswered sends or a spent policy make the next
    recovery look up a queryable target before it resends.

    Raises:
        Suspend: released. Fenced: the claim was lost meanwhile.
    """
    prev_row = call.conn.execute(SUSPEND_AFTER_FAILED_SEND_SELECT_EFFECTS_2, (call.effect_id,)).fetchone()
    prev = (prev_row["last_error"] if prev_row else None) or {}
    sends = prev_row["sends"] if prev_row else 1
    in_progress = isinstance(exc, SendInProgress)
    message = str(exc)[:MAX_ERROR_MESSAGE]
    same = prev.get("type") == type(exc).__name__ and prev.get("message") == message
    error = {
        "type": type(exc).__name__,
        "message": message,
        "send": sends,
        "in_progress": in_progress,
        # A send answered "in progress" is still in flight: neither a repeated answer nor an
        # unanswered send, so it never brings a lookup forward.
        "repeated": bool(not in_progress and same and not prev.get("in_progress") and prev.get("send") == sends - 1),
        "unanswered": int(prev.get("unanswered") or 0) + (0 if in_progress else 1),
    }
    delay = call.resend_policy.interval(max(1, sends))
    waiting_error = {"type": error["type"], "message": message, "attempt": sends}
    release_until(
        call,
        SUSPEND_AFTER_FAILED_SEND_SELECT_EFFECTS,
        {"delay": delay, "err": json.dumps(waiting_error)},
        FAILED_SEND_WAITING_SQL,
        also=(
            # Only while the send is still this claim's: one resolved or resent meanwhile
            # (another workflow's recovery) keeps its own record.
            SUSPEND_AFTER_FAILED_SEND_UPDATE_EFFECTS,
            (json.dumps(error), delay, call.effect_id, call.run.workflow_id, call.run.epoch, sends),
        ),
    )


def _timeout_kwargs(call: EffectCallState, remaining: float) -> dict:
    """``{"timeout": seconds}`` for a target whose apply() takes one, else ``{}``.

    The socket should give up a little before the watchdog fires (a tenth of the time
    left, at most 0.25 s before), so a slow answer ends this send as an unknown outcome
    instead of ending the whole worker; the watchdog stays the bound on what a socket
    timeout cannot bound (a trickle of bytes, a blocked resolver).
    """
    if not _accepts_timeout(call.target.apply):
        return {}
    return {"timeout": max(0.001, remaining - min(0.25, remaining / 10))}


def _response_log(call: EffectCallState, result: Any) -> tuple[str, tuple]:
    """The sender's own response log (LateResultPreserved): one statement, committed as its
    own transaction just before T_commit, in T_commit's first round trip.

    Its own transaction, so it survives a T_commit that rolls back or never runs (a fenced
    or killed sender). Committed asynchronously (synchronous_commit off): visible at once
    and durable against a worker crash; a PostgreSQL crash within the WAL writer's delay can
    lose the row, and then loses T_commit with it (WAL is replayed in order), so the check
    can miss an obligation then but never reports a false one. It saves a WAL flush on
    every send.
    """
    # set_config(..., true) sets synchronous_commit for this transaction only.
    return (
        RESPONSE_LOG_WITH_RESPONSES,
        (call.effect_id, call.run.workflow_id, call.run.epoch, json.dumps(result, default=str)),
    )


@hooks.traced("commit")
def _t_commit(
    call: EffectCallState, result: Any, *, via: str, status: str, rechecked: dict | None, take_status: bool
) -> EffectResult:
    """The response log, then (e) COMMITTED plus the step row in one fenced transaction
    (EffectCheckpointAtomic); fenced out, (f) the late-result compare-and-set.

    One Batch: the response log's transaction, then T_commit's fence, the effect row lock
    and the chain's tail in one round trip; in the next, one statement that inserts the
    entry and the step row, and the Sync that commits. The log must not block the commit:
    when that batch fails, for a reason other than the fence, T_commit runs again alone.
    """
    try:
        try:
            out = _commit_pipeline(
                call, result, via=via, status=status, rechecked=rechecked, take_status=take_status, with_log=True
            )
        except psycopg.Error as exc:
            log.warning("response log and T_commit of %s failed (%s); T_commit alone", call.effect_id, exc)
            if db.is_connection_fault(exc) and _committed_by_us(call):
                # The connection died after COMMIT was sent and the commit landed: the
                # outcome, read back on a fresh connection, is the answer already in hand.
                out = None
            else:
                out = _commit_pipeline(
                    call, result, via=via, status=status, rechecked=rechecked, take_status=take_status, with_log=False
                )
    except Fenced:
        _late_result(call, result)
        raise
    killpoints.hit("effect_after_commit")
    return out or EffectResult(status, call.effect_id, result)


def _committed_by_us(call: EffectCallState) -> bool:
    """Whether this claim's T_commit committed (read on a fresh connection after a fault):
    the effect is committed and its dispatch is this (workflow, epoch)'s. Under this claim's
    fence nobody else resolves a send dispatched by it, so that state is ours."""
    row = call.conn.execute(
        COMMITTED_BY_US_SELECT_EFFECTS,
        (call.run.workflow_id, call.run.epoch, call.effect_id),
    ).fetchone()
    return bool(row and row["ours"])


def _commit_pipeline(
    call: EffectCallState,
    result: Any,
    *,
    via: str,
    status: str,
    rechecked: dict | None,
    take_status: bool,
    with_log: bool,
) -> EffectResult | None:
    run = call.run
    conn = call.conn
    t_fence = time.monotonic()
    with Batch(conn, before=[_response_log(call, result)] if with_log else ()) as cur:
        # A recorded step ends a crash loop (docs/protocol.md §3.4): the fence resets takeovers
        # when this transaction records the step row.
        fence_cur = db.send_fence(cur, run.workflow_id, run.epoch, run.lease_ttl, reset_takeovers=take_status)
        # The effect row lock every appender takes first, taken by the update this
        # transaction makes anyway.
        cur.execute(T_DISPATCH_UPDATE_EFFECTS_2, (call.effect_id,))
        tail_cur = cur.execute(LAST_HASH_SQL, (call.effect_id,))
        # While the reads are on the wire: encode the entry's fields (none depends on them).
        cur.send()
        fields: dict[str, Any] = {"via": via, "result": result, "by": written_by(call)}
        if rechecked is not None:
            fields["rechecked"] = rechecked
        committed = journal.Encoded(fields)
        fence = db.fenced(fence_cur.fetchone(), run.workflow_id, run.epoch)
        tail = tail_cur.fetchone()
        # The entry and the step row in one statement (Chain.also).
        chain = journal.Chain.after(call.effect_id, tail)
        with chain.batched(cur):
            chain.append(cur, "COMMITTED", entry_ts(fence["now"]), committed)
            out = (
                record_step(call, cur, status, result, reset_takeovers=False, execute=chain.also)
                if take_status
                else None
            )
    run.renewed(t_fence, fence["cancel_requested_at"])
    return out


def _late_result(call: EffectCallState, result: Any) -> None:
    """(f) The sender was fenced out after its send: never drop the response.

    Locks only the effect row. Still dispatched by this sender's (workflow, epoch): the
    compare-and-set commit, the one FencedWrites exception. Otherwise someone else resolved
    (or resent) it: append LATE_RESULT and keep it in effects.late_result.
    """
    run = call.run
    late_sql = LATE_RESULT_LOCK_EFFECTS
    with call.conn.transaction():
        cur = call.conn.cursor()
        eff = cur.execute(late_sql, (call.effect_id,)).fetchone()
        if eff is None:
            # No effect row: its T_dispatch was lost with a failed-over primary's WAL tail
            # (ilr.failover), and this sender reconnected to the promoted standby. The answer
            # is the evidence that the send applied: keep it as a LATE_RESULT of a new
            # 'proposed' row (the first proposer's, as T_dispatch would create it), unless the
            # workflow itself was lost too.
            cur.execute(
                LATE_RESULT_INSERT_EFFECTS,
                (
                    call.effect_id,
                    run.workflow_id,
                    call.target_name,
                    call.target.tier,
                    call.payload_text,
                    call.payload_hash,
                    run.workflow_id,
                ),
            )
            eff = cur.execute(late_sql, (call.effect_id,)).fetchone()
            if eff is None:
                log.warning(
                    "late result of %s: neither the effect nor workflow %s is on this database; not journaled: %s",
                    call.effect_id,
                    run.workflow_id,
                    result,
                )
                return
        ts = entry_ts(eff["now"])
        if (
            eff["state"] == "dispatched"
            and eff["dispatch_workflow_id"] == run.workflow_id
            and eff["dispatch_epoch"] == run.epoch
        ):
            journal.append(
                cur, call.effect_id, "COMMITTED", ts, {"via": "late-commit", "result": result, "by": written_by(call)}
            )
            cur.execute(T_DISPATCH_UPDATE_EFFECTS_2, (call.effect_id,))
        else:
            journal.append(
                cur,
                call.effect_id,
                "LATE_RESULT",
                ts,
                {
                    "result": result,
                    "by": {"workflow_id": run.workflow_id, "epoch": run.epoch},
                    "settle_deadline": eff["settle_deadline"],
                    "received_in_s": round(call.received_in, 6),
                    "send_timeout": call.send_timeout,
                    "settle_margin": call.settle_margin,
                },
            )
            cur.execute(
                LATE_RESULT_UPDATE_EFFECTS,
                (
                    json.dumps({"result": result, "at": ts, "by": run.workflow_id, "epoch": run.epoch}, default=str),
                    call.effect_id,
                ),
            )


def _refuse_after_send(call: EffectCallState, reason: str, take_status: bool) -> EffectResult | None:
    """(g) a definite no from the target: a resolving REFUSED, fenced; the effect returns
    to proposed (nothing was applied). None when the send is no longer this claim's (the
    caller goes round)."""
    run = call.run
    with call.conn.transaction():
        cur = call.conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        locked = cur.execute(
            REFUSE_AFTER_SEND_LOCK_EFFECTS,
            (call.effect_id,),
        ).fetchone()
        # The no speaks of this claim's send only. Under our fence nobody resolves a send we
        # dispatched, but another workflow's recovery of the same key may have resent it
        # (its dispatch pair) or resolved it: then the effect is not ours to return to
        # proposed, and the other claim's record stands. Go round instead.
        if not (
            locked
            and locked["state"] == "dispatched"
            and locked["dispatch_workflow_id"] == run.workflow_id
            and locked["dispatch_epoch"] == run.epoch
        ):
            return None
        journal.append(
            cur,
            call.effect_id,
            "REFUSED",
            entry_ts(fence["now"]),
            {"reason": "target rejected", "detail": reason[:1000], "resolves": True},
        )
        cur.execute(
            REFUSE_AFTER_SEND_UPDATE_EFFECTS,
            (call.effect_id,),
        )
        out = record_step(call, cur, "REFUSED:target") if take_status else None
    return out or EffectResult("REFUSED:target", call.effect_id)


def _resolve_rejected_resend(
    call: EffectCallState, reason: str, payload: Any, rechecked: dict | None, take_status: bool
) -> EffectResult | None:
    """The target refused a tier-1 resend: resolve the effect by what a lookup says.

    The refusal speaks of the resend only. The first send's answer never arrived, so it may
    have been applied; a target whose stored key has lapsed, or that reads the resend as a
    conflict, refuses the resend of an applied effect. So a rejected resend never returns
    the effect to proposed on its own word: a queryable target is looked up (found:
    COMMITTED_ON_QUERY; not found: REFUSED:target, nothing applied), any other is AMBIGUOUS
    for a person to reconcile. The lookup runs outside the transaction, as in recovery; the
    first send settled before this resend was authorized, so the lookup sees its outcome.

    Returns:
        The resolution (None when the effect was resolved meanwhile: the caller goes round).

    Raises:
        LookupFailed: the lookup raised; nothing was written (the effect stays dispatched).
        Fenced: the claim was lost.
    """
    found = None
    answer = None
    if call.queryable:
        try:
            answer = codec.bound_answer(call.target.query(call.effect_id, payload))
        except Exception as exc:  # noqa: BLE001 - any failure to read the target
            raise LookupFailed(call.effect_id, exc) from exc
        found = bool(answer)
    run = call.run
    rejected = {"via": IDEMPOTENT_RESEND_VIA, "detail": reason[:1000]}
    with call.conn.transaction():
        cur = call.conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        ts = entry_ts(fence["now"])
        locked = cur.execute(RESOLVE_REJECTED_RESEND_LOCK_EFFECTS, (call.effect_id,)).fetchone()
        if locked["state"] != "dispatched":
            return None
        if found is None:
            return resolve(
                call,
                cur,
                "AMBIGUOUS",
                ts,
                {
                    "reason": "the target rejected a resend and has no lookup: the first send may have applied",
                    "rejected_resend": rejected,
                    "rechecked": rechecked,
                    "by": written_by(call),
                },
                "ambiguous",
                "AMBIGUOUS",
                take_status,
            )
        if found:
            return resolve(
                call,
                cur,
                "COMMITTED",
                ts,
                {
                    "via": "recovery-query",
                    "found": True,
                    "result": answer,
                    "rejected_resend": rejected,
                    "rechecked": rechecked,
                    "by": written_by(call),
                },
                "committed",
                "COMMITTED_ON_QUERY",
                take_status,
                answer,
            )
        return resolve(
            call,
            cur,
            "REFUSED",
            ts,
            {
                "reason": "target rejected",
                "detail": reason[:1000],
                "found": False,
                "resolves": True,
                "by": written_by(call),
            },
            "proposed",
            "REFUSED:target",
            take_status,
        )
