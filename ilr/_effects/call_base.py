"""One ``ctx.effect`` call's state and the writes its paths share (docs/protocol.md §6): the
call's step row, a resolving journal entry, and releasing the workflow to wait. The paths are
layered on this class (``ilr/_effects/send.py``, ``ilr/_effects/dispatch.py``,
``ilr/_effects/recovery.py``) and composed into ``ilr._effects.effects.EffectCall``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable
from dataclasses import fields as dataclass_fields
from typing import Any

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


class EffectCallBase:
    """The state of one ``ctx.effect`` call (its target's attributes read once) and the writes
    every path shares; ``ilr._effects.effects.EffectCall`` is the class to use."""

    seq: int | None
    """The call's step seq, set by ``EffectCall.execute`` (None under orphan recovery)."""

    def __init__(
        self,
        ctx,
        target,
        key: str,
        payload: Any,
        premises: Any,
        grant: str | None,
        name: str | None,
        local_premises: Iterable[Callable],
        compensation: bool,
        decision: dict | None = None,
    ):
        if not isinstance(key, str) or not key:
            raise InvalidInput("key", "an effect needs a non-empty idempotency key string")
        # Plain JSON and at most MAX_JSON_BYTES each: the three are stored and sealed into the
        # journal; the decision's fields are encoded before T_dispatch reads the fence.
        self.payload_text = codec.dumps(payload, "payload")
        # The amount is the target's amount_field (ilr.amounts): what a grant's max_cents caps.
        self.amount_field = amount_field(target)
        if isinstance(payload, dict) and self.amount_field in payload:
            codec.check_cents(payload[self.amount_field], f"payload.{self.amount_field}")
        codec.dumps(premises, "premises")
        codec.dumps(decision, "decision")
        codec.check_decision_ref(decision, ctx._run.workflow_id)
        if grant is not None and not isinstance(grant, str):
            raise InvalidInput("grant", "a grant is a grant id string or None")
        check_target(target)
        self.ctx = ctx
        self.run = ctx._run
        self.target = target
        self.target_name = attr(target, "name")
        self.action = attr(target, "action")
        self.key = key
        self.payload = payload
        self.premises = premises
        self.grant = grant
        self.name = name or f"effect:{self.target_name}"
        self.local_premises = tuple(local_premises)
        self.compensation = compensation
        self.decision = decision
        self.effect_id = codec.effect_id_for({"request_id": key})
        self.payload_hash = codec.payload_hash(payload)
        self.fingerprint = f"{self.effect_id}:{self.payload_hash}"
        self.send_timeout = attr(target, "send_timeout")
        self.settle_margin = attr(target, "settle_margin")
        self.premise_max_age = attr(target, "premise_max_age")
        self.queryable = attr(target, "queryable")
        self.dedup_window = attr(target, "dedup_window")
        self.resend_policy = attr(target, "resend_policy")
        self.lookup_after = attr(target, "lookup_after")

    @property
    def conn(self):
        """The run's connection for the next transaction (``WorkflowContext._conn``): one that
        died while idle, during a send say, is replaced first, so the answer in hand commits on
        a fresh session (the fence is the row's epoch and lease, not the session)."""
        return self.ctx._conn

    def _by(self) -> dict:
        """The writer of an entry: this claim (SendRequiresLiveClaim, FencedWrites read it)."""
        return {"workflow_id": self.run.workflow_id, "epoch": self.run.epoch}

    def _record_in(
        self, cur, status: str, result: Any = None, *, reset_takeovers: bool = True, execute=None
    ) -> EffectResult:
        """Insert this call's step row inside the caller's fenced transaction (and reset
        takeovers, unless the caller's fence already did). ``execute``: run the insert with
        it instead of ``cur.execute`` (``Chain.also``)."""
        out = EffectResult(status, self.effect_id, result)
        # asdict(out) without its deep copy of the result, which is encoded at once anyway.
        output = {f.name: getattr(out, f.name) for f in dataclass_fields(out)}
        store.insert_step(
            cur,
            self.run,
            self.seq,
            "effect",
            self.name,
            json.dumps(output),
            fingerprint=self.fingerprint,
            reset_takeovers=reset_takeovers,
            execute=execute,
        )
        return out

    def _resolve_in(
        self, cur, kind: str, ts: float, fields: dict, state: str, status: str, take_status: bool, result: Any = None
    ) -> EffectResult:
        """Append the resolving entry ``kind`` and set the effect's state, in the caller's
        fenced transaction that holds the effect row lock; return the status with ``result``
        (the target's answer: a lookup's, when it resolved by one), recorded as this call's
        step when ``take_status``."""
        journal.append(cur, self.effect_id, kind, ts, fields)
        cur.execute(RESOLVE_IN_UPDATE_EFFECTS, (state, self.effect_id))
        return self._result_in(cur, status, take_status, result)

    def _result_in(self, cur, status: str, take_status: bool, result: Any = None) -> EffectResult:
        if take_status:
            return self._record_in(cur, status, result)
        return EffectResult(status, self.effect_id, result)

    # -- waiting: the workflow is released, the effect and its journal untouched ----------------

    def _suspend_until_settled(self) -> None:
        """Release the workflow until recovery may act (``SETTLED_UNTIL_SQL``): no effect or
        journal write."""
        self._release_until(SETTLED_UNTIL_SQL, {})

    def _release_until(
        self, until_sql: str, params: dict, more_waiting_sql: str = NO_MORE_WAITING_SQL, also: tuple | None = None
    ) -> None:
        """Release the workflow, fenced, until the database time ``until_sql`` gives (an SQL
        expression over ``params`` and %(eid)s), with ``waiting = {seq, kind: "effect",
        effect_id, until}`` plus the jsonb object ``more_waiting_sql`` gives. ``also``: one more
        ``(sql, params)`` run in the same transaction after the release (the workflow row is
        locked first, the lock order of every fenced writer). Writes nothing else.

        Raises:
            Suspend: released. Fenced: the claim was lost meanwhile.
        """
        run = self.run
        # One statement needs no transaction block (autocommit): the block only when ``also`` is
        # given, which must commit or roll back with the release.
        with self.conn.transaction() if also is not None else contextlib.nullcontext():
            row = self.conn.execute(
                release_to_wait_sql(until_sql, more_waiting_sql),
                {**params, "seq": self.seq, "eid": self.effect_id, "wf": run.workflow_id, "epoch": run.epoch},
            ).fetchone()
            if row is None:
                raise Fenced(f"workflow {run.workflow_id}: lost its claim while waiting on {self.effect_id}")
            if also is not None:
                self.conn.execute(*also)
        run.released = True
        self.ctx.suspended = True
        raise Suspend()
