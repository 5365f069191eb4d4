"""One ``ctx.effect`` call's state, and the writes its steps share (docs/protocol.md §6): the
call's step row, a resolving journal entry, and releasing the workflow to wait.

The steps of the effect procedure are functions that take this state explicitly:
``ilr._effects.dispatch.submit`` (premises, T_dispatch), ``ilr._effects.send.send`` (the send,
T_commit), ``ilr._effects.recovery.recover`` (T_resolve); ``ilr._effects.effects.execute`` routes
a call between them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any, NoReturn

from ilr import _codec as codec
from ilr._amounts import amount_field
from ilr._db import store
from ilr._effects.result import EffectResult
from ilr._effects.targets import attr, check_target
from ilr._errors import Fenced, InvalidInput, Suspend
from ilr._journal import journal
from ilr._queries.effects import NO_MORE_WAITING_SQL, RESOLVE_IN_UPDATE_EFFECTS, SETTLED_UNTIL_SQL, release_to_wait_sql


def entry_ts(now) -> float:
    """A journal entry's ts: the transaction's database ``now()`` in epoch seconds."""
    return now.timestamp()


def target_settings(target) -> dict[str, Any]:
    """The target's attributes an effect call reads, read once (``attr``: with their defaults)."""
    return {
        "target_name": attr(target, "name"),
        "action": attr(target, "action"),
        # The amount is the target's amount_field (ilr.amounts): what a grant's max_cents caps.
        "amount_field": amount_field(target),
        "send_timeout": attr(target, "send_timeout"),
        "settle_margin": attr(target, "settle_margin"),
        "premise_max_age": attr(target, "premise_max_age"),
        "queryable": attr(target, "queryable"),
        "dedup_window": attr(target, "dedup_window"),
        "resend_policy": attr(target, "resend_policy"),
        "lookup_after": attr(target, "lookup_after"),
    }


@dataclass(eq=False)
class EffectCallState:
    """The state of one ``ctx.effect`` call (or of one orphan's recovery): what was offered, the
    target's attributes read once, and the claim it runs under. Build it with ``for_call``."""

    ctx: Any
    """The workflow's context (``WorkflowContext``): a release sets its ``suspended``."""
    run: Any
    """The claim: workflow_id, epoch, lease_ttl, renewed(), require_local_lease(), ..."""
    connection: Callable[[], Any]
    """The run's connection for the next transaction (``WorkflowContext._conn``): one that died
    while idle, during a send say, is replaced first, so the answer in hand commits on a fresh
    session (the fence is the row's epoch and lease, not the session)."""
    target: Any
    target_name: str
    action: str
    amount_field: str
    send_timeout: float
    settle_margin: float
    premise_max_age: float
    queryable: bool
    dedup_window: float
    resend_policy: Any
    lookup_after: int
    effect_id: str
    payload: Any
    payload_hash: str
    name: str
    key: str | None = None
    payload_text: str | None = None
    premises: Any = None
    grant: str | None = None
    local_premises: tuple[Callable, ...] = ()
    compensation: bool = False
    decision: dict | None = None
    fingerprint: str | None = None
    seq: int | None = None
    """The call's step seq, set at the frontier (None under orphan recovery: no step row)."""
    received_in: float = 0.0
    """Seconds from the stopwatch start to the send's answer (local monotonic clock)."""
    raise_instead_of_release: type[Exception] | None = None
    """An orphan recovery's: its workflow has ended and is never released (it would become
    claimable); ``release_until`` raises this instead, writing nothing."""

    @classmethod
    def for_call(
        cls,
        ctx,
        run,
        connection: Callable[[], Any],
        target,
        key: str,
        payload: Any,
        premises: Any,
        grant: str | None,
        name: str | None,
        local_premises: Iterable[Callable],
        compensation: bool,
        decision: dict | None = None,
    ) -> EffectCallState:
        """The state of a ``ctx.effect`` call of ``ctx`` under the claim ``run``, whose
        connection ``connection()`` returns (the other arguments: see ``WorkflowContext.effect``).

        Raises:
            InvalidInput: an empty key, a payload, premises or decision not plain JSON (or too
                big), a bad amount, a grant not a string, a target that is not one.
        """
        if not isinstance(key, str) or not key:
            raise InvalidInput("key", "an effect needs a non-empty idempotency key string")
        # Plain JSON and at most MAX_JSON_BYTES each: the three are stored and sealed into the
        # journal; the decision's fields are encoded before T_dispatch reads the fence.
        payload_text = codec.dumps(payload, "payload")
        settings = target_settings(target)
        if isinstance(payload, dict) and settings["amount_field"] in payload:
            codec.check_cents(payload[settings["amount_field"]], f"payload.{settings['amount_field']}")
        codec.dumps(premises, "premises")
        codec.dumps(decision, "decision")
        codec.check_decision_ref(decision, run.workflow_id)
        if grant is not None and not isinstance(grant, str):
            raise InvalidInput("grant", "a grant is a grant id string or None")
        check_target(target)
        effect_id = codec.effect_id_for({"request_id": key})
        payload_hash = codec.payload_hash(payload)
        return cls(
            ctx=ctx,
            run=run,
            connection=connection,
            target=target,
            **settings,
            effect_id=effect_id,
            payload=payload,
            payload_hash=payload_hash,
            name=name or f"effect:{settings['target_name']}",
            key=key,
            payload_text=payload_text,
            premises=premises,
            grant=grant,
            local_premises=tuple(local_premises),
            compensation=compensation,
            decision=decision,
            fingerprint=f"{effect_id}:{payload_hash}",
        )

    @property
    def conn(self):
        """``connection()``: the run's connection for the next transaction."""
        return self.connection()


def written_by(call: EffectCallState) -> dict:
    """The writer of an entry: this claim (SendRequiresLiveClaim, FencedWrites read it)."""
    return {"workflow_id": call.run.workflow_id, "epoch": call.run.epoch}


def record_step(
    call: EffectCallState, cur, status: str, result: Any = None, *, reset_takeovers: bool = True, execute=None
) -> EffectResult:
    """Insert the call's step row inside the caller's fenced transaction (and reset takeovers,
    unless the caller's fence already did). ``execute``: run the insert with it instead of
    ``cur.execute`` (``Chain.also``)."""
    out = EffectResult(status, call.effect_id, result)
    # asdict(out) without its deep copy of the result, which is encoded at once anyway.
    output = {f.name: getattr(out, f.name) for f in dataclass_fields(out)}
    store.insert_step(
        cur,
        call.run,
        call.seq,
        "effect",
        call.name,
        json.dumps(output),
        fingerprint=call.fingerprint,
        reset_takeovers=reset_takeovers,
        execute=execute,
    )
    return out


def resolve(
    call: EffectCallState,
    cur,
    kind: str,
    ts: float,
    fields: dict,
    state: str,
    status: str,
    take_status: bool,
    result: Any = None,
) -> EffectResult:
    """Append the resolving entry ``kind`` and set the effect's state, in the caller's fenced
    transaction that holds the effect row lock; return the status with ``result`` (the target's
    answer: a lookup's, when it resolved by one), recorded as the call's step when
    ``take_status``."""
    journal.append(cur, call.effect_id, kind, ts, fields)
    cur.execute(RESOLVE_IN_UPDATE_EFFECTS, (state, call.effect_id))
    if take_status:
        return record_step(call, cur, status, result)
    return EffectResult(status, call.effect_id, result)


# -- waiting: the workflow is released, the effect and its journal untouched -------------------


def suspend_until_settled(call: EffectCallState) -> NoReturn:
    """Release the workflow until recovery may act (``SETTLED_UNTIL_SQL``): no effect or
    journal write."""
    release_until(call, SETTLED_UNTIL_SQL, {})


def release_until(
    call: EffectCallState,
    until_sql: str,
    params: dict,
    more_waiting_sql: str = NO_MORE_WAITING_SQL,
    also: tuple | None = None,
) -> NoReturn:
    """Release the workflow, fenced, until the database time ``until_sql`` gives (an SQL
    expression over ``params`` and %(eid)s), with ``waiting = {seq, kind: "effect", effect_id,
    until}`` plus the jsonb object ``more_waiting_sql`` gives. ``also``: one more ``(sql,
    params)`` run in the same transaction after the release (the workflow row is locked first,
    the lock order of every fenced writer). Writes nothing else.

    Raises:
        Suspend: released. Fenced: the claim was lost meanwhile. ``raise_instead_of_release``
            when set (an orphan recovery): nothing written, ``also`` included.
    """
    if call.raise_instead_of_release is not None:
        # A worker releases its workflow to pending until the settle deadline; an ended workflow
        # must keep its status (it would become claimable), so the sweep stops here instead.
        raise call.raise_instead_of_release()
    run = call.run
    conn = call.conn
    # One statement needs no transaction block (autocommit): the block only when ``also`` is
    # given, which must commit or roll back with the release.
    with conn.transaction() if also is not None else contextlib.nullcontext():
        row = conn.execute(
            release_to_wait_sql(until_sql, more_waiting_sql),
            {**params, "seq": call.seq, "eid": call.effect_id, "wf": run.workflow_id, "epoch": run.epoch},
        ).fetchone()
        if row is None:
            raise Fenced(f"workflow {run.workflow_id}: lost its claim while waiting on {call.effect_id}")
        if also is not None:
            conn.execute(*also)
    run.released = True
    call.ctx.suspended = True
    raise Suspend()
