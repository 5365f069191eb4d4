"""Gated effects: submit, T_dispatch, send, T_commit, late results, recovery (docs/protocol.md §6).

The shape of one effect:

    premises read ─ t0 ─ T_dispatch ─ send (watchdog) ─ T_commit
                         (fenced)                        (fenced; else the late-result CAS)

and, after a crash or an unknown outcome, once database now() > send_deadline + settle_margin:

    re-check (outside) ─ t0 ─ T_resolve (fenced) ─ [resend ─ T_commit] or a resolving entry

Lock order in every transaction of these modules: workflow row (the fence), then effect row,
then grant row. The late-result transaction locks only the effect row.

The modules, each one path, layered into ``EffectCall`` here:

- ``ilr/_effects/result.py``: EffectResult and STATUSES.
- ``ilr/_effects/rules.py``: the grant check and the recovery decision, pure.
- ``ilr/_effects/call_base.py``: the call's state, its step row, resolving entries, releasing the workflow.
- ``ilr/_effects/send.py``: the send, T_commit, the late result, the target's refusals.
- ``ilr/_effects/dispatch.py``: the submit path and T_dispatch.
- ``ilr/_effects/recovery.py``: recovery and T_resolve.
"""

from __future__ import annotations

import logging

from ilr._effects.dispatch import EffectDispatch, _Reroute
from ilr._effects.recovery import EffectRecovery
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
    "EffectCall",
    "EffectRefused",
    "EffectResult",
    "LookupFailed",
    "Watchdog",
    "effective_tier",
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


class EffectCall(EffectDispatch, EffectRecovery):
    """One ``ctx.effect`` call at the frontier (or replayed). See ``WorkflowContext.effect``.

    ``execute`` routes the call: an open dispatch to recovery (``EffectRecovery._recover``),
    anything else to the submit path (``EffectDispatch._submit``); a target that cannot be read
    releases the workflow until the next read (``_suspend_for_lookup``)."""

    def execute(self) -> EffectResult:
        seq = self.ctx._next_seq()
        row = self.ctx._replay(seq, "effect", self.name, self.fingerprint)
        if row is not None:
            return EffectResult(**row["output"])
        self.ctx._frontier(seq, "effect", self.name)
        self.seq = seq
        if not hooks.on:
            return self._at_frontier()
        with hooks.effect(self) as span:
            result = self._at_frontier()
            hooks.effect_returned(self, span, result)
            return result

    def _at_frontier(self) -> EffectResult:
        """The call at the frontier: recovery of an open dispatch, else the submit path."""
        # The pre-read looks for an open dispatch to recover. A claim that follows no crash
        # (takeovers 0) and no unsettled send of its own cannot have left one, so its first
        # pass goes straight to T_dispatch: that reads the same row under its lock and, if
        # anyone's send is open, writes nothing and reroutes here (_Reroute). The rule keeps
        # every outcome; it saves a round trip on the common path (issue 9).
        waiting = self.run.waiting or {}
        pre_read = self.run.takeovers > 0 or waiting.get("kind") == "effect"
        while True:
            eff = (
                self.conn.execute(
                    EXECUTE_SELECT_EFFECTS,
                    (self.effect_id,),
                ).fetchone()
                if pre_read
                else None
            )
            pre_read = True
            if eff is not None and eff["state"] == "dispatched":
                # An unresolved send exists (ours from a crashed claim, or another workflow's).
                # Ours with the same payload: its recovery outcome is this call's status. Anyone
                # else's, or another payload: resolve it without taking its status, then go
                # round; the next pass returns DUPLICATE_IGNORED or refuses (docs/protocol.md
                # §6.8).
                take = eff["dispatch_workflow_id"] == self.run.workflow_id and eff["payload_hash"] == self.payload_hash
                try:
                    result = self._recover(take_status=take)
                except LookupFailed as exc:
                    self._suspend_for_lookup(exc)
                if result is not None:
                    # A send whose outcome a crashed or fenced claim left unknown, now resolved.
                    log.info(
                        "%s: recovered effect %s of %s (epoch %s): %s",
                        getattr(self.run, "owner", None) or "worker",
                        self.effect_id,
                        self.run.workflow_id,
                        self.run.epoch,
                        result.status,
                    )
                if take and result is not None:
                    return result
                continue
            try:
                return self._submit()
            except _Reroute:
                continue  # another claim dispatched it meanwhile: go round to the recovery path
            except LookupFailed as exc:
                self._suspend_for_lookup(exc)  # the premises could not be read; nothing was sent

    def _suspend_for_lookup(self, failed: LookupFailed) -> None:
        """Release the workflow until the next read of the target (LOOKUP_RETRY), writing
        nothing to the effect or its journal: before a send nothing was dispatched; in recovery
        the effect stays dispatched with its outcome unknown. The next claim goes round this
        call again (``waiting.kind`` is "effect"). ``waiting`` carries the attempt and the
        target's error, for describe() and the admin.

        Raises:
            Suspend: released. Fenced: the claim was lost meanwhile.
        """
        waiting = self.run.waiting or {}
        attempt = (waiting.get("lookup_attempt") or 0) + 1 if waiting.get("effect_id") == self.effect_id else 1
        delay = LOOKUP_RETRY.interval(attempt)
        log.warning("%s (attempt %d); workflow %s retries in %.0f s", failed, attempt, self.run.workflow_id, delay)
        self._release_until(
            UNTIL_DELAY_SQL,
            {"delay": delay, "attempt": attempt, "error": failed.error},
            LOOKUP_WAITING_SQL,
        )
