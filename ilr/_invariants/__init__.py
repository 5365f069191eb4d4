"""The invariants registry: every invariant with a code check (docs/protocol.md §11), run over
real runs.

``INVARIANTS = {"Name": check_fn}``; each ``check_fn(snapshot) -> [violation]`` reads only the
``Snapshot`` (PostgreSQL's ilr.* tables, read once) and, where the rule needs it (``NEEDS``), the
target's ledger and access log passed in as evidence. A violation is plain data (a dict) naming the
rows that break the rule. A check whose evidence is missing returns [] and is reported as skipped by
``check_all``.

Evidence (all optional): {"ledger": [refund rows with effect_id, key, amount, source],
"access_log": [target request entries with method, path, key, t_wall, body],
"invocations": [{"workflow_id", "name", "at"}] (step-body starts),
"revokes": [{"grant_id", "returned": [effect_id], "returned_at": unix seconds}]}.
"""

from __future__ import annotations

from typing import Any

from ilr._invariants.effects import (
    ambiguous_only_when_unknowable,
    at_most_one_commit,
    committed_implies_applied,
    effect_at_most_once_tier12,
    effect_checkpoint_atomic,
    every_send_journaled,
    late_result_preserved,
    no_overlapping_sends,
    no_send_after_cancel,
    no_send_on_stale_premise,
    no_send_under_revoked_grant,
    payload_bound,
    recovery_rechecks,
    revoke_linearizable,
    send_requires_live_claim,
    tier3_never_resends,
)
from ilr._invariants.receipts import (
    receipt_chain_linear,
    receipt_complete,
    receipt_truthful,
)
from ilr._invariants.schedules import schedule_overlap_respected, schedule_tick_not_early, schedule_tick_once
from ilr._invariants.slots import (
    no_run_without_slot,
    no_stranded_waiter,
    rate_respected,
    slot_fifo,
    slot_mutex,
    slot_released_at_end,
)
from ilr._invariants.snapshot import Check, Snapshot
from ilr._invariants.steps import (
    fenced_writes,
    lease_mutex,
    no_rerun_after_complete,
    step_result_unique,
    takeover_only_after_expiry,
)
from ilr._invariants.timers import (
    no_cancel_left_asleep,
    no_lost_wakeup,
    no_signal_left_behind,
    signal_exactly_once_consumed,
    timer_not_early,
)
from ilr._invariants.versions import (
    fork_never_resends,
    non_determinism_loud,
    version_pinned,
)

INVARIANTS: dict[str, Check] = {
    "NoRerunAfterComplete": no_rerun_after_complete,
    "StepResultUnique": step_result_unique,
    "FencedWrites": fenced_writes,
    "LeaseMutex": lease_mutex,
    "TakeoverOnlyAfterExpiry": takeover_only_after_expiry,
    "AtMostOneCommit": at_most_one_commit,
    "EffectAtMostOnceTier12": effect_at_most_once_tier12,
    "Tier3NeverResends": tier3_never_resends,
    "NoOverlappingSends": no_overlapping_sends,
    "CommittedImpliesApplied": committed_implies_applied,
    "AmbiguousOnlyWhenUnknowable": ambiguous_only_when_unknowable,
    "EffectCheckpointAtomic": effect_checkpoint_atomic,
    "SendRequiresLiveClaim": send_requires_live_claim,
    "NoSendUnderRevokedGrant": no_send_under_revoked_grant,
    "RevokeLinearizable": revoke_linearizable,
    "NoSendOnStalePremise": no_send_on_stale_premise,
    "RecoveryRechecks": recovery_rechecks,
    "PayloadBound": payload_bound,
    "NoSendAfterCancel": no_send_after_cancel,
    "LateResultPreserved": late_result_preserved,
    "ReceiptChainLinear": receipt_chain_linear,
    "ReceiptComplete": receipt_complete,
    "EverySendJournaled": every_send_journaled,
    "ReceiptTruthful": receipt_truthful,
    "TimerNotEarly": timer_not_early,
    "SignalExactlyOnceConsumed": signal_exactly_once_consumed,
    "NoLostWakeup": no_lost_wakeup,
    "NoCancelLeftAsleep": no_cancel_left_asleep,
    "NoSignalLeftBehind": no_signal_left_behind,
    "VersionPinned": version_pinned,
    "NonDeterminismLoud": non_determinism_loud,
    "ForkNeverResends": fork_never_resends,
    "SlotMutex": slot_mutex,
    "NoRunWithoutSlot": no_run_without_slot,
    "SlotReleasedAtEnd": slot_released_at_end,
    "NoStrandedWaiter": no_stranded_waiter,
    "SlotFifo": slot_fifo,
    "RateRespected": rate_respected,
    "ScheduleTickOnce": schedule_tick_once,
    "ScheduleTickNotEarly": schedule_tick_not_early,
    "ScheduleOverlapRespected": schedule_overlap_respected,
}
"""Every invariant with a code check (docs/protocol.md §11), by its exact name."""

NEEDS = {
    "NoRerunAfterComplete": "invocations",
    "EffectAtMostOnceTier12": "ledger",
    "CommittedImpliesApplied": "ledger",
    "ReceiptTruthful": "ledger",
}


def check_all(conn, evidence: dict | None = None, names=None) -> dict[str, Any]:
    """Run the registry over a database.

    Returns:
        {name: [violation, ...] or "skipped: no <evidence>"}; an empty list means held.
    """
    return check_snapshot(Snapshot.load(conn, evidence), names)


def check_snapshot(snap: Snapshot, names=None) -> dict[str, Any]:
    """Run the registry over a loaded snapshot (its ``evidence`` set by the caller, e.g. read
    after the snapshot so every effect committed in it has its ledger row).

    Returns:
        as ``check_all``.
    """
    out: dict[str, Any] = {}
    for name, check in INVARIANTS.items():
        if names and name not in names:
            continue
        need = NEEDS.get(name)
        if need and snap.evidence.get(need) is None:
            out[name] = f"skipped: no {need}"
            continue
        out[name] = check(snap)
    return out


def violations(results: dict[str, Any]) -> dict[str, list]:
    """Only the violated invariants of a check_all result."""
    return {k: v for k, v in results.items() if isinstance(v, list) and v}
