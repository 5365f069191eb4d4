"""Invariants of timers and signals (docs/protocol.md §11)."""

from __future__ import annotations

from collections import defaultdict

from ilr._invariants.snapshot import Snapshot, violation


def _timer_until(st: dict) -> str | None:
    # The deadline a step's timer fired at, as the suspend transaction recorded it
    # (docs/protocol.md §5.1, §5.3): a sleep's output, a signal wait's SignalTimeout error, a
    # child wait's timeout outcome. None when no timer fired (a consumed signal, an ended child).
    out, err = st["output"], st["error"]
    if st["kind"] == "sleep" and isinstance(out, dict):
        return out.get("until")
    if st["kind"] == "signal" and isinstance(err, dict) and err.get("type") == "SignalTimeout":
        return err.get("until")
    if st["kind"] == "child" and isinstance(out, dict) and out.get("status") == "timeout":
        return out.get("until")
    return None


def timer_not_early(s: Snapshot, conn=None) -> list:
    """A timer's step is recorded only at database time >= its recorded until: a sleep, a
    signal wait that timed out, a child wait that timed out (spec/Signals.tla TimerNotEarly
    covers the sleep and the wait's timeout alike)."""
    import datetime as dt

    out = []
    for st in s.steps:
        if until_text := _timer_until(st):
            until = dt.datetime.fromisoformat(until_text)
            if st["created_at"] < until:
                out.append(
                    violation(
                        workflow_id=st["workflow_id"],
                        seq=st["seq"],
                        kind=st["kind"],
                        recorded=st["created_at"],
                        until=until,
                    )
                )
    return out


def signal_exactly_once_consumed(s: Snapshot) -> list:
    """Each consumed signal is consumed by one wait, whose ``signal`` step records its payload
    and no error (a timeout's row carries a SignalTimeout error and a NULL output, which a
    JSON-null payload would otherwise equal)."""
    steps = {(st["workflow_id"], st["seq"]): st for st in s.steps}
    out = []
    consumed: defaultdict[tuple[str, int], int] = defaultdict(int)
    for sig in s.signals:
        if sig["consumed_seq"] is None:
            continue
        consumed[(sig["workflow_id"], sig["consumed_seq"])] += 1
        st = steps.get((sig["workflow_id"], sig["consumed_seq"]))
        if st is None or st["kind"] != "signal" or st["output"] != sig["payload"] or st["error"] is not None:
            out.append(
                violation(
                    signal_id=sig["id"],
                    workflow_id=sig["workflow_id"],
                    seq=sig["consumed_seq"],
                    step_output=st and st["output"],
                    payload=sig["payload"],
                )
            )
    out += [violation(workflow_id=k[0], seq=k[1], consumed_by=n) for k, n in consumed.items() if n > 1]
    return out


def no_lost_wakeup(s: Snapshot) -> list:
    """No workflow sleeps forever while an unconsumed signal it waits on exists."""
    import datetime as dt

    pending = {(sig["workflow_id"], sig["name"]) for sig in s.signals if sig["consumed_seq"] is None}
    out = []
    for wf in s.workflows.values():
        w = wf["waiting"] or {}
        forever = wf["available_at"] is not None and wf["available_at"].year == dt.MAXYEAR
        if (
            wf["status"] == "sleeping"
            and forever
            and w.get("kind") == "signal"
            and (wf["id"], w.get("signal")) in pending
        ):
            out.append(violation(workflow_id=wf["id"], waiting=w))
    return out


def no_cancel_left_asleep(s: Snapshot) -> list:
    """No workflow whose cancel is requested and not yet delivered (no step row with the error
    type Cancelled) sleeps with a deadline later than its last write: a cancel makes a sleeping
    row due now, and a suspend that meets a cancel its run has not seen releases the row due now."""
    delivered = {st["workflow_id"] for st in s.steps if (st["error"] or {}).get("type") == "Cancelled"}
    return [
        violation(workflow_id=wf["id"], waiting=wf["waiting"], available_at=str(wf["available_at"]))
        for wf in s.workflows.values()
        if wf["status"] == "sleeping"
        and wf["cancel_requested_at"] is not None
        and wf["id"] not in delivered
        and wf["available_at"] > wf["updated_at"]
    ]


def no_signal_left_behind(s: Snapshot) -> list:
    """No unconsumed signal belongs to a run that continued as new: continue-as-new hands them
    to the successor, and a signal sent after the switch goes to the current run."""
    status = {wf["id"]: wf["status"] for wf in s.workflows.values()}
    return [
        violation(signal_id=sig["id"], workflow_id=sig["workflow_id"], name=sig["name"])
        for sig in s.signals
        if sig["consumed_seq"] is None and status.get(sig["workflow_id"]) == "continued"
    ]
