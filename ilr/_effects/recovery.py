"""Recovery of a gated effect whose send outcome is unknown (docs/protocol.md §6.5): once the
send has settled, re-check the grant and premises and look the target up where the decision
table needs it (outside any transaction), then T_resolve decides under the locks: a resolving
entry, or a resend whose answer ``ilr/_effects/send.py`` commits.
"""

from __future__ import annotations

import time

from ilr import _codec as codec
from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr._effects.call_state import EffectCallState, entry_ts, resolve, suspend_until_settled, written_by
from ilr._effects.result import EffectResult
from ilr._effects.rules import effective_tier, lease_snapshot, needs_query, recovery_decision
from ilr._effects.send import send
from ilr._effects.targets import DEDUP_MARGIN
from ilr._errors import LookupFailed
from ilr._journal import journal
from ilr._journal.history import IDEMPOTENT_RESEND_VIA, REAPPLY_VIA
from ilr._queries.effects import RECOVER_LOCK_SQL, RECOVER_READ_SQL, T_RESOLVE_UPDATE_EFFECTS
from ilr._queries.grants import GRANT_FOR_SHARE, RECOVER_SELECT_GRANTS
from ilr._telemetry import hooks


def _sends(n: int) -> str:
    return f"{n} send" if n == 1 else f"{n} sends"


class _Rollback(Exception):
    """Raised inside T_resolve to roll it back when the decision needs a lookup that did not run."""

    def __init__(self, reason: str):
        self.reason = reason


@hooks.traced("recovery")
def recover(call: EffectCallState, take_status: bool) -> EffectResult | None:
    """Resolve a dispatched effect whose outcome is unknown (docs/protocol.md §6.5); None
    when it was resolved meanwhile (the caller goes round).

    Raises:
        LookupFailed: the re-check of premises or the lookup raised; nothing was written.
        Suspend: not settled yet (the workflow was released until send_deadline +
            settle_margin, or the resend policy's next attempt when later).
    """
    force_query = False
    while True:
        # (a) a short read: nothing may query or resend before send_deadline + settle_margin
        # (A2), nor before the resend policy's next attempt.
        eff = call.conn.execute(
            RECOVER_READ_SQL,
            (call.effect_id,),
        ).fetchone()
        if eff["state"] != "dispatched":
            return None  # resolved meanwhile: the caller goes round
        if not eff["settled"]:
            suspend_until_settled(call)
        entries = journal.parsed(call.conn, call.effect_id)
        dispatched = [e for e in entries if e["kind"] == "DISPATCHED"][-1]
        window_passed = eff["age"] > call.dedup_window - DEDUP_MARGIN
        tier = eff["tier"]
        eff_tier = effective_tier(tier, window_passed, call.queryable)
        last_error = eff["last_error"] or {}
        max_sends = call.resend_policy.max_attempts
        exhausted = bool(max_sends) and eff["sends"] >= max_sends
        # A send answered twice alike, or unanswered lookup_after times in a row, or a
        # spent policy: ask a target that has a lookup before sending again. A provider
        # that saved its 5xx for the key answers every resend with it; the lookup does not.
        lookup_due = (
            bool(last_error.get("repeated")) or int(last_error.get("unanswered") or 0) >= call.lookup_after
        ) or exhausted
        # (c) outside any transaction: a preliminary grant read, premises against what the
        # decision rested on, and the lookup where the table needs one. A target that
        # cannot be read leaves the outcome unknown: LookupFailed, nothing written.
        grant_id = eff["grant_id"]
        prelim = (
            call.conn.execute(
                RECOVER_SELECT_GRANTS,
                (grant_id,),
            ).fetchone()
            if grant_id
            else None
        )
        violations: list[str] = []
        found = None
        answer = None
        try:
            if eff_tier != 3:
                validate = getattr(call.target, "validate_premises", None)
                if validate and dispatched.get("premises") is not None:
                    violations = list(validate(dispatched["premises"], call.effect_id))
            stale_guess = bool(violations) or not (prelim and prelim["live"])
            if eff_tier != 3 and (
                force_query or needs_query(tier, window_passed, call.queryable, stale_guess, lookup_due)
            ):
                answer = codec.bound_answer(call.target.query(call.effect_id, eff["payload"]))
                found = bool(answer)
        except Exception as exc:  # noqa: BLE001 - any failure to read the target
            raise LookupFailed(call.effect_id, exc) from exc
        # (d) T_resolve, with the stopwatch for a resend started before it begins, so the
        # resend's local deadline is no later than the send_deadline it writes
        # (docs/protocol.md §6.5).
        t0 = time.monotonic()
        try:
            outcome = t_resolve(
                call, eff, dispatched, violations, window_passed, found, take_status, exhausted=exhausted, answer=answer
            )
        except _Rollback:
            force_query = True  # the grant turned stale inside T_resolve: look it up first
            continue
        if outcome is None or isinstance(outcome, EffectResult):
            return outcome
        via, status, rechecked = outcome
        killpoints.hit("resolve_after_commit")
        # The resend carries the DISPATCHED entry's payload, never this call's: a replay may
        # offer another payload for the key, which T_dispatch refuses once this is resolved.
        return send(
            call, t0, via=via, status=status, rechecked=rechecked, take_status=take_status, payload=dispatched["effect"]
        )


def t_resolve(
    call: EffectCallState,
    eff,
    dispatched,
    violations,
    window_passed,
    found,
    take_status,
    *,
    exhausted=False,
    answer=None,
):
    """T_resolve (docs/protocol.md §6.5): under the fence and the effect and grant row locks,
    decide what ``recover`` read and looked up (``rules.recovery_decision``) and write it.

    Args:
        eff: the effect row ``recover`` read settled; dispatched: its last DISPATCHED entry;
        violations: the premises' re-check; window_passed: past the dedup window; found: the
            lookup's answer (None: no lookup ran), answer: what it returned; take_status:
            record the outcome as the call's step; exhausted: the resend policy is spent.

    Returns:
        None when the effect changed meanwhile (the caller goes round); a resolving
        EffectResult; or ``(via, status, rechecked)`` when RESENT was committed and the
        caller sends.

    Raises:
        _Rollback: the decision needs a lookup that did not run (nothing written).
        Fenced: the claim was lost.
    """
    run = call.run
    t_fence = time.monotonic()
    with call.conn.transaction():
        cur = call.conn.cursor()
        fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
        ts = entry_ts(fence["now"])
        locked = cur.execute(
            RECOVER_LOCK_SQL,
            (call.effect_id,),
        ).fetchone()
        # Two workflows can recover one dispatched effect (a fork and its original): both
        # read it settled in (a), outside any lock. The first to take the row lock resends
        # and moves send_deadline on; the second must see that here, under the lock, and
        # wait again (None: the caller goes round), or it would resend a second time. The
        # same dispatch is the same (sends, dispatch pair, grant): what (a) read and the
        # re-check and lookup were about.
        if (
            locked["state"] != "dispatched"
            or not locked["settled"]
            or (locked["sends"], locked["dispatch_workflow_id"], locked["dispatch_epoch"], locked["grant_id"])
            != (eff["sends"], eff["dispatch_workflow_id"], eff["dispatch_epoch"], eff["grant_id"])
        ):
            return None
        grant = cur.execute(GRANT_FOR_SHARE, (locked["grant_id"],)).fetchone() if locked["grant_id"] else None
        payload = eff["payload"]
        lease_live, snapshot = lease_snapshot(grant, call.action, payload, eff["payload_hash"], call.amount_field)
        rechecked = {"lease_live": lease_live, "lease": snapshot, "violations": violations, "at": ts}
        stale = (not lease_live) or bool(violations)
        stale_kind = "lease" if not lease_live else "stale_premise"
        action = recovery_decision(
            tier=eff["tier"],
            window_passed=window_passed,
            queryable=call.queryable,
            stale=stale,
            found=found,
            exhausted=exhausted,
        )
        last_error = eff["last_error"] or {}
        last_answer = f"{last_error.get('type')}: {last_error.get('message')}" if last_error else "none recorded"
        if action == "query":
            raise _Rollback("query")
        if action == "ambiguous":
            if stale and eff["tier"] == 1 and not window_passed:
                reason = f"{stale_kind} at recovery, no lookup"
            elif exhausted and eff["tier"] == 1 and not window_passed:
                reason = (
                    f"resend policy spent: {_sends(eff['sends'])} without an answer (the last: {last_answer}); "
                    "the target has no lookup"
                )
            else:
                reason = "tier 3: nothing can be learned after a send"
            return resolve(
                call,
                cur,
                "AMBIGUOUS",
                ts,
                {"reason": reason, "rechecked": rechecked, "by": written_by(call)},
                "ambiguous",
                "AMBIGUOUS",
                take_status,
            )
        if action == "commit_on_query":
            # The lookup's answer is kept as a send's is: in the entry and the result.
            return resolve(
                call,
                cur,
                "COMMITTED",
                ts,
                {
                    "via": "recovery-query",
                    "rechecked": rechecked,
                    "found": found,
                    "result": answer,
                    "by": written_by(call),
                },
                "committed",
                "COMMITTED_ON_QUERY",
                take_status,
                answer,
            )
        if action == "refuse":
            if stale:
                reason, status = f"{stale_kind} at recovery", f"REFUSED:{stale_kind}_at_recovery"
            else:
                reason = (
                    f"resend policy spent: {_sends(eff['sends'])} without an answer (the last: {last_answer}); "
                    "the lookup found nothing, so nothing was applied"
                )
                status = "REFUSED:resends_exhausted"
            return resolve(
                call,
                cur,
                "REFUSED",
                ts,
                {"reason": reason, "resolves": True, "found": found, "rechecked": rechecked, "by": written_by(call)},
                "proposed",
                status,
                take_status,
            )
        # resend (tier 1, idempotent) or reapply (tier 2, not found): the effect row update
        # and a signed RESENT entry carrying the re-check that authorized it, committed
        # before any byte goes out, so every request on the wire is on the signed record.
        via = IDEMPOTENT_RESEND_VIA if action == "resend" else REAPPLY_VIA
        journal.append(
            cur,
            call.effect_id,
            "RESENT",
            ts,
            {
                "via": via,
                "send": eff["sends"] + 1,
                "rechecked": rechecked,
                "by": written_by(call),
                "send_deadline": ts + call.send_timeout,
                "after": last_error or None,
            },
        )
        cur.execute(
            T_RESOLVE_UPDATE_EFFECTS,
            (run.workflow_id, run.epoch, call.send_timeout, call.effect_id),
        )
    run.renewed(t_fence, fence["cancel_requested_at"])
    if action == "resend":
        return (via, "COMMITTED_BY_RETRY", rechecked)
    return (via, "REAPPLIED_AFTER_QUERY", rechecked)
