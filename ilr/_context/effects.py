"""Gated effects and approval requests: the durable calls of ``WorkflowContext`` that reach
outside (docs/protocol.md §6; approval requests: ``ilr.approval_requests``).
"""

from __future__ import annotations

from typing import Any

from ilr import _codec as codec
from ilr._context.locks import LockCalls
from ilr._context.steps import StepCalls
from ilr._db import store
from ilr._effects import effects
from ilr._effects.call_state import EffectCallState
from ilr._effects.effects import EffectRefused
from ilr._effects.result import EffectResult
from ilr._errors import Cancelled, InvalidInput, SignalTimeout
from ilr._telemetry import hooks


class EffectCalls(StepCalls, LockCalls):
    """``ctx.request_approval`` (built on ``wait_signal``) and ``ctx.effect`` (which re-checks the
    ``ctx.lock`` blocks around it)."""

    def request_approval(
        self,
        target,
        key: str,
        payload: Any,
        *,
        premises: Any = None,
        decision: dict | None = None,
        summary: str = "",
        timeout: float = 86400.0,
        action: str | None = None,
    ):
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
                (or None), a bad amount (under the target's ``amount_field``; a missing one when
                a two-person rule applies), a summary over one line, a bad timeout; nothing
                is written.
            Cancelled: the workflow was cancelled while waiting (the request reads cancelled).
        """
        from ilr._effects import targets
        from ilr._ops import approval_requests as ar
        from ilr._queries.approvals import INSERT_APPROVAL_REQUEST_SQL

        if isinstance(target, str):
            codec.check_text(target, "target", "must be an effect target, or a registered target's name")
            target_name, target = target, targets.get_target(target)
            if target is None:
                raise InvalidInput(
                    "target",
                    f"no target is registered under the name {target_name!r} (ilr.register_target)",
                )
        else:
            targets.check_is_target(target)
            target_name = targets.attr(target, "name")
        codec.check_text(key, "key")
        if premises is not None and not callable(premises) and not isinstance(premises, dict):
            raise InvalidInput(
                "premises",
                f"must be a JSON object of facts, a callable returning one, or None, got {type(premises).__name__}",
            )
        if decision is not None and not isinstance(decision, dict):
            raise InvalidInput(
                "decision", f"must be a Decision.ref (a JSON object) or None, got {type(decision).__name__}"
            )
        codec.check_decision_ref(decision, self.workflow_id)
        # The action ctx.effect will ask the grant to cover (targets.attr's default included).
        action = codec.check_text(action or targets.attr(target, "action"), "action")
        payload_text = codec.dumps(payload, "payload")
        # One definition of the amount (ilr.amounts, the target's amount_field) for the rule,
        # the grant's cap and the review UI; unreadable under a two-person rule is refused here.
        amount, needed = ar.request_amount(target, target_name, action, payload)
        summary = ar.check_summary(summary)
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout != timeout or not timeout > 0:
            raise InvalidInput("timeout", f"must be a positive number of seconds, got {timeout!r}")
        name = f"approval_request:{key}"
        seq = self._next_seq()
        row = self._replay(seq, "step", name)
        if row is None:
            self._frontier(seq, "step", name)
            facts = premises() if callable(premises) else premises
            if facts is not None and not isinstance(facts, dict):
                raise InvalidInput(
                    "premises", f"the callable must return a JSON object of facts or None, got {type(facts).__name__}"
                )
            request_id = ar.request_id_for(self.workflow_id, seq)
            output = {"request_id": request_id, "target": target_name, "action": action, "key": key}
            # Two fenced statements: the row, then the step. A crash between them re-runs this
            # call, whose insert finds the row (same id) and writes nothing.
            self._conn.execute(
                INSERT_APPROVAL_REQUEST_SQL,
                {
                    "id": request_id,
                    "wf": self.workflow_id,
                    "epoch": self.epoch,
                    "ttl": self._run.lease_ttl,
                    "seq": seq,
                    "target": target_name,
                    "action": action,
                    "key": key,
                    "payload": payload_text,
                    "hash": codec.payload_hash(payload),
                    "amount": amount,
                    "premises": codec.dumps(facts, "premises"),
                    "decision": codec.dumps(decision, "decision"),
                    "summary": summary,
                    "needed": needed,
                    "timeout": float(timeout),
                },
            )
            store.record_step(
                self._conn,
                self._run,
                seq=seq,
                kind="step",
                name=name,
                output_json=codec.dumps(output, "approval request"),
            )
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
            if hooks.on:
                hooks.approval_decided(self._run, seq, req)
            outcome = {**ar.outcome_of(req), "payload": req["payload"], "facts_seen": req["premises"]}
            store.record_step(
                self._conn,
                self._run,
                seq=seq,
                kind="step",
                name=name,
                output_json=codec.dumps(outcome, "approval outcome"),
            )
        else:
            outcome = row["output"]
        self.last_approval = outcome
        if outcome["status"] != "approved":
            return None
        return ar.Approval(
            request_id=request_id,
            grant_id=outcome["grant_id"],
            payload=outcome["payload"],
            facts_seen=outcome["facts_seen"],
            approved_by=tuple(outcome["approved_by"]),
            decided_at=outcome["decided_at"],
        )

    def effect(
        self,
        target,
        key: str,
        payload: Any,
        premises: Any = None,
        grant: str | None = None,
        name: str | None = None,
        local_premises=(),
        compensation: bool = False,
        raise_on_refusal: bool = False,
        decision: dict | None = None,
    ):
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
                ``fetchone()`` / ``fetchall()`` give dict rows (an ``ilr._db.batch.Batch``; each
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

        held = self.held_locks_premise()
        if held is not None:
            local_premises = (*local_premises, held)
        call = EffectCallState.for_call(
            self,
            self._run,
            # The connection for each next transaction, read then: one that died while idle is
            # replaced (``_conn``).
            lambda: self._conn,
            target,
            key,
            payload,
            premises,
            grant,
            name,
            local_premises,
            compensation,
            decision,
        )
        seq = self._next_seq()
        row = self._replay(seq, "effect", call.name, call.fingerprint)
        if row is not None:
            result = EffectResult(**row["output"])
        else:
            self._frontier(seq, "effect", call.name)
            call.seq = seq
            result = effects.execute(call)
        if raise_on_refusal and result.refused:
            raise EffectRefused(result)
        return result
