"""What the TLC suite checks (docs/protocol.md §14), with which constants, and what the
prediction (written before the model was checked) expects; the paths it reads and writes."""

from __future__ import annotations

from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
SPEC_DIR = BASE_DIR / "spec"
RESULTS_DIR = BASE_DIR / "results"
WORK_DIR = BASE_DIR / ".data" / "tlc"

LABEL = "model check for the stated constants, not a proof of the Python or SQL"


#: Safety invariants marked "M" in docs/protocol.md §11 (Runtime.tla), in that table's order.
SAFETY = [
    "NoRerunAfterComplete",
    "StepResultUnique",
    "FencedWrites",
    "LeaseMutex",
    "TakeoverOnlyAfterExpiry",
    "AtMostOneCommit",
    "EffectAtMostOnceTier12",
    "Tier3NeverResends",
    "NoOverlappingSends",
    "CommittedImpliesApplied",
    "AmbiguousOnlyWhenUnknowable",
    "EffectCheckpointAtomic",
    "SendRequiresLiveClaim",
    "NoSendUnderRevokedGrant",
    "RevokeLinearizable",
    "NoSendOnStalePremise",
    "RecoveryRechecks",
    "PayloadBound",
    "NoSendAfterCancel",
    "LateResultPreserved",
    "ReceiptChainLinear",
    "EverySendJournaled",
]
LIVENESS = ["Termination", "EffectResolved"]
SIGNALS = ["TimerNotEarly", "SignalExactlyOnceConsumed", "NoLostWakeup"]
#: Slots.tla (concurrency slots, docs/protocol.md §14): the invariants that must hold at every
#: limit case, named as the registry's rows in docs/protocol.md §11.
SLOTS = ["SlotMutex", "NoRunWithoutSlot", "NoStrandedWaiter", "SlotFifo"]
SLOTS_LIVENESS = ["WaiterEventuallyRuns"]
#: Schedules.tla (the tick transaction, docs/protocol.md §5.8 and §14): two workers, the
#: database clock and crashes; ScheduleTickOnce and ScheduleTickNotEarly are the registry's rows
#: of docs/protocol.md §11.
SCHEDULES = ["TypeOK", "ScheduleTickOnce", "ScheduleTickNotEarly", "MissedNotStarted", "NoTickLost"]
#: The limit cases Slots.cfg runs at (one key, three workflows).
SLOTS_CASES = {"l1": {"Limit": "1"}, "l2": {"Limit": "2"}}
MODES = ["interlock", "temporal_idem", "temporal_precheck"]
MODE_CFG = {
    "interlock": None,  # one config per tier, TIER_CFG
    "temporal_idem": "RuntimeTemporalIdem.cfg",
    "temporal_precheck": "RuntimeTemporalPrecheck.cfg",
}
#: Tier cases: t1q is tier 1 with a lookup (Stripe-like), t1n tier 1 without one.
TIERS = {
    "t1q": {"Tier": "1", "Queryable": "TRUE"},
    "t1n": {"Tier": "1", "Queryable": "FALSE"},
    "t2": {"Tier": "2", "Queryable": "TRUE"},
    "t3": {"Tier": "3", "Queryable": "FALSE"},
}
TIER_CFG = {"t1q": "RuntimeT1.cfg", "t1n": "RuntimeT1NoLookup.cfg", "t2": "RuntimeT2.cfg", "t3": "RuntimeT3.cfg"}
TIER_TEXT = {"t1q": "tier 1 with lookup", "t1n": "tier 1 without lookup", "t2": "tier 2", "t3": "tier 3"}

#: Invariants that do not apply to the Temporal baselines, with the reason.
NOT_APPLICABLE = {
    "StepResultUnique": "no ilr.steps: the activity result lives in Temporal's history",
    "FencedWrites": "no fence: Temporal has no claim epoch or lease on the workflow",
    "LeaseMutex": "no claims",
    "TakeoverOnlyAfterExpiry": "no claims",
    "AmbiguousOnlyWhenUnknowable": "never writes AMBIGUOUS",
    "LateResultPreserved": "no effect journal (predicted n/a)",
    "ReceiptChainLinear": "no receipt chain",
    "EverySendJournaled": "no signed record of a send: the history holds no entry per request",
}
#: Invariants that the Temporal modes hold for a reason the reader should know.
TEMPORAL_NOTES = {
    "NoRerunAfterComplete": "vacuous: the plain step is not modeled in the Temporal modes",
    "CommittedImpliesApplied": "by construction: the target's own record is Temporal's commit",
}
#: Invariants whose hold at some tiers is vacuous by their definition, in every mode.
TIER_SCOPE = {
    "EffectAtMostOnceTier12": "covers tiers 1 and 2 only (and tier 1 without lookup only until "
    "its keys are pruned), so tier 3 holds vacuously",
    "Tier3NeverResends": "covers tier 3 and tier 1 without lookup past its window, so t1q and t2 hold vacuously",
}

#: The base constants every Runtime config starts from.
BASE_CONSTANTS = {
    "MaxClock": "12",
    "LeaseTTL": "3",
    "SendTimeout": "2",
    "SettleMargin": "2",
    "DedupAge": "6",
    "MaxCrashes": "2",
    "Events": '{"revoke", "hand_refund_full", "hand_refund_partial", "cancel", "prune_keys", "redecide"}',
}

#: The prediction per invariant, written before the model was checked: (interlock,
#: temporal_idem, temporal_precheck). "hold*" marks an interlock cell the predicted table left
#: blank but its text implied ("interlock mode holds every safety invariant"); None is "not
#: predicted".
PREDICTION: dict[str, tuple[str | None, str | None, str | None]] = {
    "NoRerunAfterComplete": ("hold", "hold", "hold"),
    "StepResultUnique": ("hold*", None, None),
    "FencedWrites": ("hold*", None, None),
    "LeaseMutex": ("hold*", None, None),
    "TakeoverOnlyAfterExpiry": ("hold*", None, None),
    "AtMostOneCommit": ("hold", "hold", "hold"),
    "EffectAtMostOnceTier12": ("hold", "V@t2, V after prune", "V@t2"),
    "Tier3NeverResends": ("hold", "V", "V"),
    "NoOverlappingSends": ("hold", "V", "V"),
    "CommittedImpliesApplied": ("hold", "hold", "hold"),
    "AmbiguousOnlyWhenUnknowable": ("hold*", None, None),
    "EffectCheckpointAtomic": ("hold", "V", "V"),
    "SendRequiresLiveClaim": ("hold", "V", "V"),
    "NoSendUnderRevokedGrant": ("hold", "V", "V"),
    "RevokeLinearizable": ("hold", "V", "V"),
    "NoSendOnStalePremise": ("hold", "V", "V"),
    "RecoveryRechecks": ("hold", "V", "V"),
    "PayloadBound": ("hold", "V", "hold"),
    "NoSendAfterCancel": ("hold", "V", "V"),
    "LateResultPreserved": ("hold", "n/a", "n/a"),
    "ReceiptChainLinear": ("hold*", None, None),
    "EverySendJournaled": ("hold", None, None),
    "Termination": ("hold", "hold", "hold"),
    "EffectResolved": ("hold", "hold", "hold"),
}

#: The broken designs (docs/protocol.md §14), the two findings' configs among them.  Config ->
#: invariants that must each produce a counterexample.
BROKEN = {
    "NaiveRecovery": ["RecoveryRechecks", "NoSendOnStalePremise", "NoSendUnderRevokedGrant"],
    "NoFencing": ["SendRequiresLiveClaim", "FencedWrites", "EffectAtMostOnceTier12"],
    "GrantCheckOutsideTxn": ["RevokeLinearizable", "NoSendUnderRevokedGrant"],
    "CommitWithoutCheckpoint": ["EffectCheckpointAtomic"],
    "RecoverBeforeDeadline": ["NoOverlappingSends", "EffectAtMostOnceTier12"],
    "StopwatchAfterDispatch": ["NoOverlappingSends"],
    "LateAckDropped": ["LateResultPreserved"],
    "NoLocalLeaseCheck": ["NoRerunAfterComplete"],
    "ThinDedupMargin": ["EffectAtMostOnceTier12"],
    "WakeOnlyIfSleeping": ["NoLostWakeup"],
    "UnjournaledResend": ["EverySendJournaled"],
    # Slots.tla.  SlotBodiesMutex is SlotMutex's second half on its own, so that its trace (two
    # workflows in a step body under current claims, Limit 1) is reported too.
    "SlotReleaseNotFenced": ["SlotMutex", "SlotBodiesMutex", "NoRunWithoutSlot"],
    "SlotAcquireWithoutKeyLock": ["NoStrandedWaiter", "SlotMutex", "SlotFifo"],
    "SlotCancelWithoutKeyLock": ["NoStrandedWaiter"],
    # Schedules.tla.
    "ScheduleNoLockNoKey": ["ScheduleTickOnce"],
    "ScheduleWorkerClock": ["ScheduleTickNotEarly"],
}
#: The module of each broken config that is not Runtime.tla's.
BROKEN_MODULE = {
    "WakeOnlyIfSleeping": "Signals",
    "SlotReleaseNotFenced": "Slots",
    "SlotAcquireWithoutKeyLock": "Slots",
    "SlotCancelWithoutKeyLock": "Slots",
    "ScheduleNoLockNoKey": "Schedules",
    "ScheduleWorkerClock": "Schedules",
}
BROKEN_SOURCE = {
    "NoLocalLeaseCheck": "finding: the local lease (docs/protocol.md §14)",
    "ThinDedupMargin": "finding: the dedup margin (docs/protocol.md §14)",
    "SlotReleaseNotFenced": "slots: why the release is in the fenced end (docs/protocol.md §14)",
    "SlotAcquireWithoutKeyLock": "slots: why the start takes the key lock (docs/protocol.md §14)",
    "SlotCancelWithoutKeyLock": "slots: why a waiter's cancel takes the key lock (docs/protocol.md §14)",
    "ScheduleNoLockNoKey": "schedules: why a tick is inserted under the row lock, unique (docs/protocol.md §5.8)",
    "ScheduleWorkerClock": "schedules: why the due test is on the database clock (docs/protocol.md §5.8)",
}

#: The two findings' traces (docs/protocol.md §14), as the action sequence each broken config
#: must reproduce.  The first is the whole 11-state trace (compared up to renaming workers); the
#: second is the order of the key steps of a 26-state trace.
FINDINGS_TRACES = {
    "NoLocalLeaseCheck": (
        "exact",
        [
            "Init",
            "Claim(w1)",
            "Tick",
            "Tick",
            "Tick",
            "Replay(w1)",
            "Claim(w2)",
            "Replay(w2)",
            "RunPlain(w2)",
            "RecordPlain(w2)",
            "RunPlain(w1)",
        ],
    ),
    "ThinDedupMargin": (
        "subsequence",
        ["Claim", "TDispatchCommit", "Send", "Next", "Claim", "BeginRecovery", "TResolve", "Send", "Prune", "Next"],
    ),
}

#: Reachability witnesses per tier (interlock): each must be violated, or a "hold" of the
#: invariants along that path would be vacuous.
WITNESSES = {
    "t1q": [
        "Witness_Completed",
        "Witness_Takeover",
        "Witness_RecoveryResend",
        "Witness_RefusedAtRecovery",
        "Witness_LateResult",
        "Witness_Pruned",
        "Witness_Cancelled",
    ],
    # No Witness_Pruned at t1n: the model offers Prune only while a request is in flight (an
    # exact reduction, see Runtime.tla), and without a lookup nothing is sent past the window.
    "t1n": [
        "Witness_Completed",
        "Witness_Takeover",
        "Witness_RecoveryResend",
        "Witness_Ambiguous",
        "Witness_LateResult",
        "Witness_Cancelled",
    ],
    "t2": [
        "Witness_Completed",
        "Witness_Takeover",
        "Witness_RecoveryResend",
        "Witness_RefusedAtRecovery",
        "Witness_LateResult",
        "Witness_Cancelled",
    ],
    "t3": ["Witness_Completed", "Witness_Takeover", "Witness_Ambiguous", "Witness_LateResult", "Witness_Cancelled"],
}
SIGNALS_WITNESSES = ["Witness_Completed", "Witness_Timeout", "Witness_BothConsumed", "Witness_WokenBySignal"]
#: Slots.tla's witnesses per limit case.  At Limit 2 three workflows leave at most one waiter, so
#: no waiter can be queued ahead of another (Witness_PrioJump is Limit 1's).
SLOTS_WITNESSES = {
    "l1": [
        "Witness_Admitted",
        "Witness_PrioJump",
        "Witness_Takeover",
        "Witness_StaleInBody",
        "Witness_Carried",
        "Witness_Cancelled",
        "Witness_FullBodies",
        "Witness_AllEnded",
    ],
    "l2": [
        "Witness_Admitted",
        "Witness_Takeover",
        "Witness_StaleInBody",
        "Witness_Carried",
        "Witness_Cancelled",
        "Witness_FullBodies",
        "Witness_AllEnded",
    ],
}

#: Constants the quick profile overrides (see :func:`quick_overrides`); the config files hold
#: the full profile's values.
QUICK_OVERRIDES = {"MaxClock": "7", "MaxCrashes": "1"}

#: The Temporal modes are checked with the base clock and dedup age, in three runs per
#: tier instead of one: all six events and two crashes together do not fit the time budget (the
#: server retries every SendTimeout while older attempts and requests are still live, and a
#: reset restarts the run at any point).  G2 repeats G1 without redecide: a reset's path to a
#: second payment is shorter than the key-pruning path the prediction names, so breadth-first search
#: reports the pruning path only where no reset can happen.  G2 adds no behavior to G1, so it
#: runs only where that path is in scope: tier 1 with lookup (the target prunes only at tier 1,
#: and without lookup EffectAtMostOnceTier12 excludes pruned keys).  A cell is V if any group
#: violates it, hold only if every group run at that tier holds.
TEMPORAL_GROUPS = {
    "G1": {"Events": BASE_CONSTANTS["Events"], "MaxCrashes": "0"},
    "G2": {
        "Events": '{"revoke", "hand_refund_full", "hand_refund_partial", "cancel", "prune_keys"}',
        "MaxCrashes": "0",
    },
    "G3": {"Events": "{}", "MaxCrashes": BASE_CONSTANTS["MaxCrashes"]},
}
#: The tiers each group runs at (all tiers when not listed).
TEMPORAL_GROUP_TIERS = {"G2": ["t1q"]}
