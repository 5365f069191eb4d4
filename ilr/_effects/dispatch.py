"""The submit path of a gated effect (docs/protocol.md §6.2): the external premises read outside
any transaction, then T_dispatch, which refuses, records a duplicate, or commits DISPATCHED and
hands over to the send (``ilr._effects.send.send``). A first send that may repeat a dispatch lost in a
failover is decided here too (``ilr.failover``).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr._db.batch import Batch
from ilr._effects.call_state import EffectCallState, entry_ts, record_step, release_until, written_by
from ilr._effects.result import EffectResult
from ilr._effects.rules import lease_snapshot
from ilr._effects.send import send
from ilr._errors import LookupFailed
from ilr._journal import journal
from ilr._ops import failover
from ilr._queries.effects import (
    LINEAGE_SQL,
    LOST_AMBIGUOUS_UPDATE_EFFECTS,
    T_DISPATCH_INSERT_EFFECTS,
    T_DISPATCH_UPDATE_EFFECTS,
    T_DISPATCH_UPDATE_EFFECTS_2,
    UNTIL_PARAM_SQL,
)
from ilr._queries.grants import GRANT_FOR_SHARE
from ilr._queries.journal import LAST_HASH_SQL
from ilr._queries.misc import LOST_DISPATCH_SELECT_SQL
from ilr._telemetry import hooks


class _Reroute(Exception):
    """Raised inside T_dispatch to roll it back when another claim's dispatch is open."""


def _external_violations(call: EffectCallState) -> tuple[list[str], float]:
    """(violations, monotonic read time) of the external premises.

    Raises:
        LookupFailed: validate_premises raised (nothing was written).
    """
    validate = getattr(call.target, "validate_premises", None)
    try:
        violations = list(validate(call.premises, call.effect_id)) if (validate and call.premises is not None) else []
    except Exception as exc:  # noqa: BLE001 - any failure to read the target
        raise LookupFailed(call.effect_id, exc) from exc
    return violations, time.monotonic()


def submit(call: EffectCallState) -> EffectResult | None:
    """The submit path: read the external premises, T_dispatch, and the send it authorizes.

    Returns:
        the call's recorded status (a refusal, a duplicate, or the send's committed answer);
        None when another claim's dispatch is open or took the send over (the caller goes round
        to recovery).

    Raises:
        LookupFailed: the premises or a failover lookup could not be read; nothing written.
        Suspend: released to wait (an unknown send outcome, a lost dispatch not yet settled).
        Fenced: the claim was lost.
    """
    # After a failover this first send may repeat one whose T_dispatch was lost with the old
    # primary's WAL tail (ilr.failover, rule 3): wait out that send, look it up where a lookup
    # exists, and let T_dispatch decide with the answer. No run is suspect without a switch:
    # the normal path pays one attribute test.
    lost = None
    switch = failover.suspect(call.run)
    if switch is not None:
        lost = _lost_dispatch(call, switch)
        if lost["found"] or lost["decision"] == "ambiguous":
            try:
                result = t_dispatch(call, [], lost=lost)  # nothing will be sent: no premise read
            except _Reroute:
                return None  # another claim dispatched it meanwhile: go round to the recovery path
            # With such a ``lost``, every path of T_dispatch records a status (step 6b at the latest).
            assert result is not None
            return result
    # (a) external premises, outside any transaction (A3: true as read at read time).
    violations, read_t = _external_violations(call)
    # (b) kill point, then the stopwatch. Past premise_max_age since the read: read again.
    killpoints.hit("effect_before_dispatch")
    t0 = time.monotonic()
    while t0 - read_t > call.premise_max_age:
        violations, read_t = _external_violations(call)
        t0 = time.monotonic()
    # (c) T_dispatch.
    try:
        outcome = t_dispatch(call, violations, lost=lost)
    except _Reroute:
        return None  # another claim dispatched it meanwhile: go round to the recovery path
    if outcome is not None:
        return outcome
    killpoints.hit("effect_after_dispatch")
    # (d) send, inside the remaining local time (the stopwatch began before T_dispatch).
    # None: the target's no came after another claim took the send over: go round.
    return send(call, t0, via="first-send", status="COMMITTED", rechecked=None, payload=call.payload)


def _lost_dispatch(call: EffectCallState, switch: dict) -> dict:
    """Decide a first send that may repeat a dispatch lost in a failover (ilr.failover).

    Before a lookup or a send, database time must be past ``switch["at"] + send_timeout +
    settle_margin``: the lost send started before the old primary died, so it has landed by
    then or never will (A2). Earlier, the workflow is released until then.

    Returns:
        {"decision": "query" | "send" | "ambiguous", "found": bool | None, "fields": the
        entry field recorded with the outcome}.

    Raises:
        Suspend: too early (released until the lost send has settled).
        LookupFailed: the lookup raised; nothing was written.
    """
    decision = failover.decision(call.target.tier, bool(call.queryable), call.dedup_window)
    found = None
    if decision != "ambiguous":
        until = switch["at"] + dt.timedelta(seconds=call.send_timeout + call.settle_margin)
        if call.conn.execute(LOST_DISPATCH_SELECT_SQL, (until,)).fetchone()["early"]:
            release_until(call, UNTIL_PARAM_SQL, {"until": until})
    if decision == "query":
        try:
            found = bool(call.target.query(call.effect_id, call.payload))
        except Exception as exc:  # noqa: BLE001 - any failure to read the target
            raise LookupFailed(call.effect_id, exc) from exc
    fields = {
        "timeline": switch["timeline"],
        "seen_at": switch["at"].timestamp(),
        "decision": decision,
        "found": found,
    }
    return {"decision": decision, "found": found, "fields": fields}


@hooks.traced("dispatch")
def t_dispatch(call: EffectCallState, violations: list[str], lost: dict | None = None) -> EffectResult | None:
    """T_dispatch (docs/protocol.md §6.2). Returns a recorded refusal or duplicate, or None
    when the send is authorized (DISPATCHED committed).

    ``lost`` (from ``_lost_dispatch``): this first send may repeat a dispatch lost in a
    failover. Found by the lookup: COMMITTED via recovery-query, nothing sent. Decision
    "ambiguous": AMBIGUOUS, nothing sent. Decision "send" (tier 1, no lookup): a refusal
    before the send is AMBIGUOUS instead, since the lost send may have applied. Either
    way only after the payload and terminal-state checks.

    One Batch: two round trips and one commit. The first sends every read in lock order
    (workflow row by the fence, effect row, grant row) and the chain's tail; the server
    runs them one after another, each with a snapshot taken after the lock before it was
    granted, so the tail and the grant are read under the locks exactly as if each waited
    for the one before. A fence that matched nothing rolls the whole transaction back
    (nothing commits). The second sends one statement that inserts the journal entries
    and updates the effect row, and the Sync that commits.
    """
    run = call.run
    conn = call.conn
    t_fence = time.monotonic()
    with Batch(conn) as cur:
        fence_cur = db.send_fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        # 1. the effect row, created by the first proposer, locked and read in one statement:
        # the insert holds its new row; on a conflict the no-op update waits for the row's
        # lock and returns its latest version (as SELECT ... FOR UPDATE would).
        eff_cur = cur.execute(
            T_DISPATCH_INSERT_EFFECTS,
            (
                call.effect_id,
                run.workflow_id,
                call.target_name,
                call.target.tier,
                call.payload_text,
                call.payload_hash,
            ),
        )
        tail_cur = cur.execute(LAST_HASH_SQL, (call.effect_id,))
        # 8 (read now, used below). The grant, FOR SHARE: a concurrent revoke waits for this
        # commit, and a revoke that committed first is seen here (RevokeLinearizable,
        # NoSendUnderRevokedGrant).
        grant_cur = cur.execute(GRANT_FOR_SHARE, (call.grant,)) if call.grant else None
        # While the reads are on the wire: encode the entries' fields that do not depend on them.
        cur.send()
        proposed = journal.Encoded(_proposed_fields(call))
        dispatched = journal.Encoded(
            {
                "effect": call.payload,
                "lease": call.grant,
                "premises": call.premises,
                "by": written_by(call),
                "settle_margin": call.settle_margin,
                **({"compensation": True} if call.compensation else {}),
            }
        )
        fence = db.fenced(fence_cur.fetchone(), run.workflow_id, run.epoch)
        eff = eff_cur.fetchone()
        assert eff is not None  # insert ... on conflict do update ... returning: always one row
        tail = tail_cur.fetchone()
        grant = grant_cur.fetchone() if grant_cur is not None else None
        chain = journal.Chain.after(call.effect_id, tail)
        # One INSERT for this transaction's entries, when the block ends (Chain.batched).
        with chain.batched(cur):
            ts = entry_ts(fence["now"])
            cancelled = fence["cancel_requested_at"] is not None
            if cancelled:
                run.cancel_requested = True  # delivered as Cancelled at the next frontier call
            # 3. an open dispatch by another claim: write nothing; wait out its settle time.
            if eff["state"] == "dispatched":
                raise _Reroute()
            # The key, not the workflow, names the effect (§6.8): a workflow of another
            # lineage reusing a key reaches this effect's row and chain. The chain is the
            # effect's record: what was proposed for it, sent, and how each send ended, which
            # its receipt shows and its owner answers for. Another workflow's refusal says
            # nothing of that effect (nothing was sent), so it is recorded on the refusing
            # call's own step row (status and reason in EffectResult.result) and appended to
            # nobody's chain: the first receipt stays byte for byte as it was. A refusal chain
            # under an id derived from (key, workflow) would sign it too, but at the cost of a
            # second id for one key that the call's result, its step fingerprint and every
            # reader of effect ids would have to tell apart. What does concern the effect (its
            # dispatch, a lost failover dispatch) is still journaled on its chain. A fork or a
            # continued-as-new run shares its original's history and keys, so its entries
            # stay on the chain as the original's would (docs/protocol.md §6.8).
            foreign = eff["workflow_id"] != run.workflow_id and not _same_lineage(call, cur, eff["workflow_id"])
            proposed_on_chain = False

            def propose() -> None:
                nonlocal proposed_on_chain
                if not proposed_on_chain:
                    chain.append(cur, "PROPOSED", ts, proposed)
                    proposed_on_chain = True

            def refused_here(fields: dict, status: str) -> EffectResult:
                why = {k: v for k, v in fields.items() if k != "resolves"}
                return record_step(call, cur, status, {**why, "effect_owner": eff["workflow_id"]})

            # 4. the payload is bound at the first proposal.
            if eff["payload_hash"] != call.payload_hash:
                if foreign:
                    return refused_here(
                        {
                            "reason": "payload differs from recorded decision",
                            "recorded_payload_hash": eff["payload_hash"],
                            "offered_payload_hash": call.payload_hash,
                        },
                        "REFUSED:conflicting_payload",
                    )
                chain.append(cur, "PROPOSED", ts, _proposed_fields(call))
                chain.append(
                    cur,
                    "REFUSED",
                    ts,
                    {
                        "reason": "payload differs from recorded decision",
                        "recorded": eff["payload"],
                        "offered": call.payload,
                    },
                )
                return record_step(call, cur, "REFUSED:conflicting_payload")
            # 5. already resolved for good.
            if eff["state"] == "ambiguous":
                return record_step(call, cur, "AMBIGUOUS")
            if eff["state"] == "committed":
                return record_step(call, cur, "DUPLICATE_IGNORED")
            # 6. PROPOSED (a foreign call's, only once it is not refused)
            if not foreign:
                propose()
            # 6b. a dispatch lost in a failover may have applied (ilr.failover): what the
            # lookup found, or AMBIGUOUS where nothing can be learned; before any refusal,
            # which would claim that nothing happened.
            if lost is not None and (lost["found"] or lost["decision"] == "ambiguous"):
                propose()
                if lost["found"]:
                    chain.append(
                        cur,
                        "COMMITTED",
                        ts,
                        {"via": "recovery-query", "found": True, "failover": lost["fields"], "by": written_by(call)},
                    )
                    chain.also(T_DISPATCH_UPDATE_EFFECTS_2, (call.effect_id,))
                    return record_step(call, cur, "COMMITTED_ON_QUERY")
                return _lost_ambiguous(
                    call,
                    chain,
                    cur,
                    ts,
                    lost,
                    "tier 3: a dispatch of this effect may have "
                    "been lost in a failover, and nothing can be learned after a send",
                )

            def refuse(fields: dict, status: str) -> EffectResult:
                if lost is not None and lost["decision"] == "send":
                    propose()  # the lost send concerns the effect: on its chain
                    return _lost_ambiguous(
                        call,
                        chain,
                        cur,
                        ts,
                        lost,
                        (
                            f"refused before a send ({status}), but a dispatch of this effect may have been "
                            "lost in a failover and its send may have applied; the target has no lookup"
                        ),
                        refusal=fields,
                    )
                if foreign:
                    return refused_here(fields, status)
                chain.append(cur, "REFUSED", ts, fields)
                return record_step(call, cur, status)

            # 7. cancel (NoSendAfterCancel): compensation sends are the only ones allowed.
            if cancelled and not call.compensation:
                return refuse({"reason": "cancelled", "resolves": True}, "REFUSED:cancelled")
            # 8. the grant read above under FOR SHARE.
            allowed, snapshot = lease_snapshot(grant, call.action, call.payload, call.payload_hash, call.amount_field)
            checks: dict[str, Any] = {"lease_live": allowed, "lease": snapshot}
            if not allowed:
                return refuse(
                    {
                        "reason": "lease not live, or it does not cover this effect",
                        "checks": checks,
                        "resolves": True,
                    },
                    "REFUSED:lease",
                )
            # 9. AUTHORIZED (a foreign call's after 10, with its PROPOSED: a refusal leaves none)
            if not foreign:
                chain.append(cur, "AUTHORIZED", ts, {"lease": call.grant})
            # 10. local (SQL) premises at the commit, plus the external ones at their read.
            all_violations = list(violations)
            for premise in call.local_premises:
                all_violations.extend(premise(cur) or [])
            checks["violations"] = all_violations
            if all_violations:
                return refuse({"reason": all_violations, "checks": checks, "resolves": True}, "REFUSED:stale_premise")
            if foreign:
                propose()
                chain.append(cur, "AUTHORIZED", ts, {"lease": call.grant})
            # 11-12. DISPATCHED and the durable send deadline: now() of this transaction (the
            # fence's) plus send_timeout, computed once so the row and the entry hold one value.
            deadline_at = fence["now"] + dt.timedelta(seconds=call.send_timeout)
            # In the same statement as the entries' INSERT (Chain.also).
            chain.also(
                T_DISPATCH_UPDATE_EFFECTS,
                (call.grant, run.workflow_id, run.epoch, deadline_at, call.settle_margin, call.effect_id),
            )
            chain.append(
                cur,
                "DISPATCHED",
                ts,
                dispatched.merged(
                    {
                        "checks": checks,
                        "send_deadline": deadline_at.timestamp(),
                        **({"failover": lost["fields"]} if lost is not None else {}),
                    }
                ),
            )
    run.renewed(t_fence, None)
    return None


def _lost_ambiguous(call: EffectCallState, chain, cur, ts: float, lost: dict, reason: str, refusal: dict | None = None):
    """Inside T_dispatch's batch: AMBIGUOUS for a first send that may repeat a dispatch lost
    in a failover and cannot be looked up (``t_dispatch``)."""
    chain.append(
        cur,
        "AMBIGUOUS",
        ts,
        {
            "reason": reason,
            "failover": lost["fields"],
            "by": written_by(call),
            **({"refusal": refusal} if refusal is not None else {}),
        },
    )
    chain.also(LOST_AMBIGUOUS_UPDATE_EFFECTS, (call.effect_id,))
    return record_step(call, cur, "AMBIGUOUS")


def _same_lineage(call: EffectCallState, cur, other: str) -> bool:
    """Whether this run and workflow ``other`` share an ancestor by ``forked_from`` or
    ``continued_from`` (a fork, a continued run, or their original). Read inside
    T_dispatch's batch, only when the effect row's workflow is not this run's.

    A child is not of its parent's lineage: it is a workflow of its own, with its own keys.
    """
    row = cur.execute(LINEAGE_SQL, (call.run.workflow_id, other, call.run.workflow_id, other)).fetchone()
    return bool(row and row["kin"])


def _proposed_fields(call: EffectCallState) -> dict:
    return {
        "agent": call.run.name,
        "lease": call.grant,
        "premises": call.premises,
        "effect": call.payload,
        "decision": call.decision,
    }
