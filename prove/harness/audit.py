"""The auditor (docs/protocol.md §16.5): P1 to P5 from each system's own records only.

- runtime: the receipt bundle (ilr.receipt_bundle through Runtime.receipt) and ``verify()``.
- Temporal: the workflow history of every run of the workflow id (through the temporalio
  client) plus the worker's attempt log (JSON lines written by prove.peers.temporal_baselines).

It never reads the target's ledger. Answers are True, False or "unknown"; ``score`` compares
them with the oracle's ground truth (``oracle.ground_truth``): 1 per correct definite answer, 0 for
"unknown", and a false claim for a definite wrong one. P5 is scored 1 only when a flipped byte
in a copy of the record is detected.
"""

from __future__ import annotations

import copy
import json

from prove.harness.oracle import ground_truth

QUESTIONS = ("P1", "P2", "P3", "P4", "P5")


def audit_runtime(bundle: dict | None) -> dict:
    """Answers from a runtime receipt bundle (None: no effect was ever proposed)."""
    from ilr import verify_receipt

    if bundle is None:
        return {
            "P1": False,
            "P2": False,
            "P3": True,
            "P4": True,
            "P5": "unknown",
            "source": "no effect row: nothing was proposed",
        }
    v = verify_receipt(bundle)
    tampered = copy.deepcopy(bundle)
    body = tampered["entries"][-1] if tampered.get("entries") else ""
    if body:
        # Flip one byte inside the last entry's text (a digit or letter), then re-verify.
        i = len(body) // 2
        ch = body[i]
        tampered["entries"][-1] = body[:i] + ("x" if ch != "x" else "y") + body[i + 1 :]
    detected = not verify_receipt(tampered)["tamper_evident"]
    p3 = v["authorized_when_fired"]
    if p3 is None:  # nothing was dispatched: vacuously authorized
        p3 = True
    p4 = v["assumptions_held"]
    if p4 is None:  # nothing was sent: no send went out on a changed premise
        p4 = True
    # P2 is "unknown" after a reapply that follows an unanswered send (score() counts it 0, never
    # a false claim); P4 counts only the premise checks that accompanied a send, each DISPATCHED
    # and each resend, plus A2 on late results (ilr.verify_receipt's docstring states both rules).
    return {
        "P1": v["happened"],
        "P2": v["happened_once"],
        "P3": p3,
        "P4": p4,
        "P5": bool(v["tamper_evident"] and detected),
        "source": "receipt verify()",
        "verify": {
            k: v[k]
            for k in (
                "valid",
                "tamper_evident",
                "happened",
                "happened_once",
                "authorized_when_fired",
                "assumptions_held",
                "sends",
            )
        },
        "problems": v["problems"],
        "tamper_detected": detected,
    }


def audit_temporal(histories: list[dict], attempts: list[dict]) -> dict:
    """Answers from Temporal's records.

    Args:
        histories: one per run of the workflow id: {"run_id", "refund_completed": bool,
            "refund_failed": bool, "refund_attempt": int (last attempt number), "timed_out": int}.
        attempts: the worker's attempt log entries for this workflow id.

    P1: the refund activity completed in some run's history (yes); else a send recorded in the
    attempt log without an answer (unknown); else no. P2: not derivable when a retry followed a
    timeout or more than one send was attempted: unknown; one send and a completion: yes. P3 and
    P4: not recorded: unknown. P5: history is not signed: a flipped byte goes undetected.
    """
    completed = any(h["refund_completed"] for h in histories)
    sends = [a for a in attempts if a.get("event") == "send"]
    answered = [a for a in attempts if a.get("event") == "response" and a.get("status") == 200]
    retried = any(h.get("refund_attempt", 1) > 1 or h.get("timed_out", 0) for h in histories)
    if completed or answered:
        p1 = True
    elif sends:
        p1 = "unknown"
    else:
        p1 = False
    if p1 is True:
        p2 = True if (len(sends) == 1 and not retried and len(histories) == 1) else "unknown"
    elif p1 is False:
        p2 = False
    else:
        p2 = "unknown"
    return {
        "P1": p1,
        "P2": p2,
        "P3": "unknown",
        "P4": "unknown",
        "P5": False,
        "source": "workflow history + attempt log",
        "sends_in_log": len(sends),
        "runs": len(histories),
        "retried": retried,
    }


def score(answers: dict, truth: dict) -> dict:
    """{"score": 0..5, "false_claims": n, "per": {P: 1 | 0 | "false"}}."""
    per = {}
    total = 0
    false_claims = 0
    for q in QUESTIONS:
        a = answers.get(q, "unknown")
        if q == "P5":
            ok = a is True
            per[q] = 1 if ok else 0
            total += per[q]
            continue
        if a == "unknown" or a is None:
            per[q] = 0
        elif bool(a) == bool(truth[q]):
            per[q] = 1
            total += 1
        else:
            per[q] = "false"
            false_claims += 1
    return {"score": total, "false_claims": false_claims, "per": per}


def rescored(run: dict) -> dict:
    """A run's audit scored again under the current ground-truth rule (``oracle.ground_truth``).

    Both inputs were recorded when the run ran: the answers the system's own records gave and the
    oracle's counts from the target. The score is a function of the two, so a report rebuilt from
    shards scores every run by one rule, whichever commit ran it. A run that was not audited (no
    answers) keeps its audit unchanged.

    Returns:
        ``{"answers", "truth", "score", "false_claims", "per"}``.
    """
    recorded = run.get("audit") or {}
    answers, counts = recorded.get("answers"), run.get("oracle")
    if not answers or not counts:
        return recorded
    truth = ground_truth(counts)
    return {"answers": answers, "truth": truth, **score(answers, truth)}


def temporal_history_summary(events) -> dict:
    """Summarise one run's history events (temporalio HistoryEvent protos) for the auditor."""
    from temporalio.api.enums.v1 import EventType

    scheduled = {}
    out = {
        "refund_completed": False,
        "refund_failed": False,
        "refund_attempt": 0,
        "timed_out": 0,
        "decide_completed": 0,
        "timer_fired": [],
        "timer_started": [],
        "signals": 0,
        "events": 0,
    }
    for e in events:
        out["events"] += 1
        t = e.event_time.ToDatetime().timestamp() if e.HasField("event_time") else None
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[e.event_id] = e.activity_task_scheduled_event_attributes.activity_type.name
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            a = e.activity_task_started_event_attributes
            if scheduled.get(a.scheduled_event_id) == "refund":
                out["refund_attempt"] = max(out["refund_attempt"], a.attempt)
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
            name = scheduled.get(e.activity_task_completed_event_attributes.scheduled_event_id)
            if name == "refund":
                out["refund_completed"] = True
            elif name == "decide":
                out["decide_completed"] += 1
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
            if scheduled.get(e.activity_task_failed_event_attributes.scheduled_event_id) == "refund":
                out["refund_failed"] = True
        elif e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
            out["timed_out"] += 1
        elif e.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
            secs = e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta().total_seconds()
            out["timer_started"].append({"t": t, "seconds": secs})
        elif e.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
            out["timer_fired"].append({"t": t})
        elif e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            out["signals"] += 1
    return out


def read_attempt_log(path, workflow_id: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            entries = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
    return [e for e in entries if e.get("workflow_id") == workflow_id]
