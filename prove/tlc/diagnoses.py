"""Measured against predicted: the summary of a row over the tiers, its agreement with the
prediction, and the written diagnoses and readings; every disagreement must be explained here."""

from __future__ import annotations

from prove.tlc.plan import TIERS
from prove.tlc.tool import TraceStep


def summarize(per_tier: dict[str, str]) -> str:
    """Summarize outcomes over tiers as hold, V, V@t2, V@t1q,t2 ... (n/a when not applicable,
    "not run" when the profile did not check it)."""
    if not per_tier:
        return "not run"
    checked = {t: o for t, o in per_tier.items() if o in ("hold", "V", "error")}
    if not checked:
        return "n/a"
    if any(o == "error" for o in checked.values()):
        return "error"
    bad = [t for t in TIERS if checked.get(t) == "V"]
    if not bad:
        return "hold"
    if len(bad) == len(checked):
        return "V"
    return "V@" + ",".join(bad)


def agreement(pred: str | None, per_tier: dict[str, str], traces: dict[str, list[TraceStep]]) -> str:
    """Compare a measured row with its prediction: agrees, partly, disagrees, or n/p."""
    measured = summarize(per_tier)
    bad = {t for t, o in per_tier.items() if o == "V"}
    if pred is None:
        return "not predicted"
    if measured == "not run":
        return "not run"
    if measured == "error":
        return "error"
    if pred in ("hold", "hold*"):
        return "agrees" if not bad else "disagrees"
    if pred == "n/a":
        return "agrees" if measured == "n/a" else "disagrees"
    if pred == "V":
        return "agrees" if bad else "disagrees"
    if pred == "V@t2":
        if bad == {"t2"}:
            return "agrees"
        return "partly" if "t2" in bad else "disagrees"
    if pred.startswith("V@t2, V after prune"):
        # traces here is every trace of the row, keyed "tier/group"
        if "t2" not in bad:
            return "disagrees"
        tier1 = {k: t for k, t in traces.items() if k.startswith("t1")}
        after_prune = [k for k, t in tier1.items() if any(s.action == "Prune" for s in t)]
        if not after_prune:
            return "disagrees"
        others = {k for k in tier1 if k not in after_prune}
        return "agrees" if not others and bad <= {"t1q", "t1n", "t2"} else "partly"
    return "not predicted"


# ---------------------------------------------------------------------------------------------
# Diagnoses: every measured cell that differs from its prediction must be explained here.
# Each entry names the measured summary it explains; a different measurement is reported as
# undiagnosed, so a stale explanation can never sit beside a new figure.

DIAGNOSES: dict[tuple[str, str], tuple[str, str]] = {
    ("temporal_idem", "EffectAtMostOnceTier12"): (
        "V@t1q,t1n,t2 partly",
        (
            "Both paths the prediction names are measured: tier 2 (the retry starts at the "
            "start-to-close timeout and resends with no lookup, and there is no key to dedupe, so the "
            "first request and the retry are both applied) and tier 1 after the key is pruned (with "
            "lookup, events G2: a retry past PruneOK's age carries the same run-1 key, the target "
            "forgets the key while it is in flight, and applies it again; that trace is printed "
            "below). The model also finds a path the predicted cell leaves out, at tier 1 with and "
            "without lookup (events G1): a reset (redecide) starts run 2 with a new run id, so the key "
            '<run id>-<activity id> differs and the target applies 20 and then 30 ("a reset pays 20 + '
            '30"). The prediction is incomplete, not contradicted. Tier 3 holds only because the '
            "invariant covers tiers 1 and 2 only (docs/protocol.md §11); Tier3NeverResends covers "
            "tier 3."
        ),
    ),
}

#: Readings of assumption rows: what a row the prediction does not cover means, or which path a
#: measured agreement took.  Each applies only to the measurement it names.
ASSUMPTION_NOTES: dict[tuple[str, str, str], tuple[str, str]] = {
    ("PAUSE", "interlock", "NoRerunAfterComplete"): (
        "V",
        (
            "the local lease's stated residual (docs/protocol.md §3.3): a SIGSTOP between the local "
            "lease check and the body start lets a worker start the body after the successor recorded "
            "the row (A1)."
        ),
    ),
    ("SERVER_SLOW", "interlock", "Witness_LateAfterDuplicate"): (
        "V@t2",
        (
            "Reached at tier 2, but not through the late first request: the send watchdog ends "
            "that request's sender at its local deadline, so when the request lands after "
            "send_deadline + settle_margin nobody waits for its response. The LATE_RESULT in the "
            "shortest trace is the recovery resend's own response, acted on after a later claim "
            "resolved the effect by query; so the journal shows the double application through a "
            "COMMITTED (recovery-query) followed by a LATE_RESULT, never through the late first "
            "response itself."
        ),
    ),
}
#: The Temporal baselines concede the tier-2 duplicate without either toggle, so their toggle
#: rows agree through the baseline's own retry path, not through the assumption.  Each note is
#: printed only when every counterexample of the row is, step for step, one the same mode
#: produced at the same tier without the toggle (:func:`_toggle_adds_nothing`).
_BASELINE_T2 = (
    "Agrees, but the shortest trace uses no {what}: it is the baseline's own tier-2 "
    "duplicate (the retry starts at the start-to-close timeout and sends {how}), the "
    "same counterexample as without the toggle; the toggle adds nothing the baseline "
    "does not already concede."
)
BASELINE_NOTES = {
    (toggle, mode, "EffectAtMostOnceTier12"): ("V@t2", _BASELINE_T2.format(what=what, how=how))
    for toggle, what in (("PAUSE", "pause"), ("SERVER_SLOW", "slow processing"))
    for mode, how in (
        ("temporal_idem", "with no lookup"),
        ("temporal_precheck", "after a lookup that ran before the first request landed"),
    )
}

#: What each broken config's counterexample shows, in one sentence (the traces are below).
BROKEN_READING = {
    "UnjournaledResend": "a worker crashes after its send, recovery resends without a RESENT entry, and "
    "the request is on the wire but not on the signed record: the receipt counts fewer sends than "
    "the target received.",
    "NaiveRecovery": "recovery resends after the grant was revoked (or the premise went stale) "
    "without re-checking either.",
    "NoFencing": "a zombie whose lease expired keeps writing and sending; and two recoverers "
    "(the zombie and the current claim) both pass T_resolve, so at tier 2 the effect "
    "is applied twice: in T_resolve it is the fence that excludes a concurrent "
    "recoverer (T_resolve does not compare the dispatch pair).",
    "GrantCheckOutsideTxn": "the grant is checked before T_dispatch, a revoke commits, and the "
    "dispatch still authorizes the send; rt.revoke did not list it.",
    "CommitWithoutCheckpoint": "a crash between the COMMITTED transaction and the step-row "
    "transaction leaves a committed effect without its step row "
    "while the dispatching claim is still current.",
    "RecoverBeforeDeadline": "recovery looks the effect up before the first request is "
    "processed and resends while it is still in flight.",
    "StopwatchAfterDispatch": "T_dispatch commits late, the watchdog's deadline counts from the "
    "commit, the send leaves after the durable send_deadline and is "
    "still in flight when recovery resends.",
    "LateAckDropped": "a sender gets its response after a successor resolved the effect, and "
    "the response is dropped instead of appended as LATE_RESULT.",
    "NoLocalLeaseCheck": "the finding's trace: the step-row load outlives the lease, a "
    "successor runs and records the step, then the first worker starts the "
    "body again.",
    "ThinDedupMargin": "the finding's trace: a tier-1 resend authorized just inside the "
    "window is processed after the target forgot the key.",
    "WakeOnlyIfSleeping": "the mailbox is read empty, the signal commits while the row is "
    "running (so it does not wake it), and the suspend sleeps forever.",
    "SlotReleaseNotFenced": "a worker whose lease lapsed returns from its body and releases the "
    "slot unfenced, admitting the waiter while its workflow is still running; the workflow is "
    "taken over and both run step bodies under current claims with Limit 1.",
    "SlotAcquireWithoutKeyLock": "a start reads the slot full, the holder ends and admits nobody, "
    "and the start then inserts its waiter behind a free slot; two starts that read a free slot "
    "both become holders.",
    "SlotCancelWithoutKeyLock": "a cancel reads a waiter, a release admits it, and the cancel "
    "deletes its row, now a holder's: the slot is lost and the next waiter is stranded.",
    "ScheduleNoLockNoKey": "two workers read the same next_tick_at without the row lock and, with no "
    "unique key on the tick's workflow, both insert it: one tick starts twice.",
    "ScheduleWorkerClock": "a worker whose clock runs ahead takes a tick as due by its own clock "
    "and starts it before its time on the database clock.",
}


def diagnose(mode: str, invariant: str, measured: str, agree: str) -> str:
    """The written diagnosis of a disagreement, or an 'undiagnosed' marker.

    A diagnosis applies only to the exact measurement (summary and agreement) it was written
    for.
    """
    entry = DIAGNOSES.get((mode, invariant))
    if entry and entry[0] == f"{measured} {agree}":
        return entry[1]
    return (
        f"UNDIAGNOSED: measured {measured}; no explanation is recorded for this "
        "measurement. Investigate before publishing."
    )
