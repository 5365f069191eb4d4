"""Gated effects: submit, T_dispatch, send, T_commit, late results, recovery (docs/protocol.md §6).

The shape of one effect:

    premises read ─ t0 ─ T_dispatch ─ send (watchdog) ─ T_commit
                         (fenced)                        (fenced; else the late-result CAS)

and, after a crash or an unknown outcome, once database now() > send_deadline + settle_margin:

    re-check (outside) ─ t0 ─ T_resolve (fenced) ─ [resend ─ T_commit] or a resolving entry

Lock order in every transaction of these modules: workflow row (the fence), then effect row,
then grant row. The late-result transaction locks only the effect row.

The steps are functions of one state object (``EffectCallState``), each module one step;
``execute`` here routes a call at the frontier between them:

- ``ilr/_effects/result.py``: EffectResult and STATUSES.
- ``ilr/_effects/rules.py``: the grant check and the recovery decision, pure.
- ``ilr/_effects/call_state.py``: the call's state; the writes every step shares (its step row,
  a resolving entry, releasing the workflow).
- ``ilr/_effects/dispatch.py``: ``submit``: the premises, T_dispatch, then ``send``.
- ``ilr/_effects/send.py``: ``send``: the send, T_commit, the late result, the target's refusals.
- ``ilr/_effects/recovery.py``: ``recover``: the re-check and lookup, T_resolve, then ``send``.
- ``ilr/_effects/orphans.py``: ``recover`` under a synthetic claim, for an ended workflow.
"""

from __future__ import annotations

import logging
from typing import NoReturn

from ilr._effects.call_state import EffectCallState, release_until
from ilr._effects.dispatch import submit
from ilr._effects.recovery import recover
from ilr._effects.result import STATUSES, EffectResult
from ilr._effects.rules import effective_tier, lease_snapshot, needs_query, recovery_decision
from ilr._errors import EffectRefused, LookupFailed
from ilr._queries.effects import EXECUTE_SELECT_EFFECTS, LOOKUP_WAITING_SQL, UNTIL_DELAY_SQL
from ilr._queries.grants import GRANT_FOR_SHARE
from ilr._retry import RetryPolicy
from ilr._telemetry import hooks
from ilr._worker.watchdog import WATCHDOG_EXIT_CODE, Watchdog

__all__ = [
    "GRANT_FOR_SHARE",
    "LOOKUP_RETRY",
    "STATUSES",
    "WATCHDOG_EXIT_CODE",
    "EffectCallState",
    "EffectRefused",
    "EffectResult",
    "LookupFailed",
    "Watchdog",
    "effective_tier",
    "execute",
    "lease_snapshot",
    "needs_query",
    "recovery_decision",
]

log = logging.getLogger("ilr.effects")

LOOKUP_RETRY = RetryPolicy()
"""How an effect waits out a target it cannot read (its premises before a send; its premises or
its lookup during recovery): Temporal's defaults, 1 s doubling to 100 s, without end
(docs/protocol.md §6.7). Before a send nothing has happened yet; during recovery the
outcome stays unknown. Either way the runtime writes nothing and tries again later, as a failed
activity attempt would be retried."""


def execute(call: EffectCallState) -> EffectResult:
    """Run one ``ctx.effect`` call at the frontier (its ``seq`` set; see ``WorkflowContext.effect``):
    recovery of an open dispatch (``recovery.recover``), anything else by the submit path
    (``dispatch.submit``); a target that cannot be read releases the workflow until the next
    read (``_suspend_for_lookup``).

    Raises:
        Suspend: the workflow was released to wait. Fenced: the claim was lost.
    """
    if not hooks.on:
        return _at_frontier(call)
    with hooks.effect(call) as span:
        result = _at_frontier(call)
        hooks.effect_returned(call, span, result)
        return result


def _at_frontier(call: EffectCallState) -> EffectResult:
    """The call at the frontier: recovery of an open dispatch, else the submit path."""
    # The pre-read looks for an open dispatch to recover. A claim that follows no crash
    # (takeovers 0) and no unsettled send of its own cannot have left one, so its first
    # pass goes straight to T_dispatch: that reads the same row under its lock and, if
    # anyone's send is open, writes nothing and reroutes here (``submit`` returns None). The rule keeps
    # every outcome; it saves a round trip on the common path (issue 9).
    run = call.run
    waiting = run.waiting or {}
    pre_read = run.takeovers > 0 or waiting.get("kind") == "effect"
    while True:
        eff = call.conn.execute(EXECUTE_SELECT_EFFECTS, (call.effect_id,)).fetchone() if pre_read else None
        pre_read = True
        if eff is not None and eff["state"] == "dispatched":
            # An unresolved send exists (ours from a crashed claim, or another workflow's).
            # Ours with the same payload: its recovery outcome is this call's status. Anyone
            # else's, or another payload: resolve it without taking its status, then go
            # round; the next pass returns DUPLICATE_IGNORED or refuses (docs/protocol.md
            # §6.8).
            take = eff["dispatch_workflow_id"] == run.workflow_id and eff["payload_hash"] == call.payload_hash
            try:
                result = recover(call, take_status=take)
            except LookupFailed as exc:
                _suspend_for_lookup(call, exc)
            if result is not None:
                # A send whose outcome a crashed or fenced claim left unknown, now resolved.
                log.info(
                    "%s: recovered effect %s of %s (epoch %s): %s",
                    getattr(run, "owner", None) or "worker",
                    call.effect_id,
                    run.workflow_id,
                    run.epoch,
                    result.status,
                )
            if take and result is not None:
                return result
            continue
        try:
            submitted = submit(call)
        except LookupFailed as exc:
            _suspend_for_lookup(call, exc)  # the premises could not be read; nothing was sent
        if submitted is not None:
            return submitted
        # Another claim dispatched it meanwhile: go round to the recovery path.


def _suspend_for_lookup(call: EffectCallState, failed: LookupFailed) -> NoReturn:
    """Release the workflow until the next read of the target (LOOKUP_RETRY), writing nothing
    to the effect or its journal: before a send nothing was dispatched; in recovery the effect
    stays dispatched with its outcome unknown. The next claim goes round this call again
    (``waiting.kind`` is "effect"). ``waiting`` carries the attempt and the target's error, for
    describe() and the admin.

    Raises:
        Suspend: released. Fenced: the claim was lost meanwhile.
    """
    waiting = call.run.waiting or {}
    attempt = (waiting.get("lookup_attempt") or 0) + 1 if waiting.get("effect_id") == call.effect_id else 1
    delay = LOOKUP_RETRY.interval(attempt)
    log.warning("%s (attempt %d); workflow %s retries in %.0f s", failed, attempt, call.run.workflow_id, delay)
    release_until(
        call,
        UNTIL_DELAY_SQL,
        {"delay": delay, "attempt": attempt, "error": failed.error},
        LOOKUP_WAITING_SQL,
    )
