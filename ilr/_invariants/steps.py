"""Invariants of steps, claims and fencing (docs/protocol.md §11)."""

from __future__ import annotations

from typing import Any

from ilr._invariants.snapshot import Snapshot, violation


def no_rerun_after_complete(s: Snapshot) -> list:
    """A step body never starts after its step row committed (evidence: invocations)."""
    inv = s.evidence.get("invocations")
    if inv is None:
        return []
    recorded = {(st["workflow_id"], st["name"]): st["ts"] for st in s.steps if st["kind"] == "step"}
    return [
        violation(workflow_id=i["workflow_id"], step=i["name"], started=i["at"], row_committed=recorded[key])
        for i in inv
        if (key := (i["workflow_id"], i["name"])) in recorded and i["at"] > recorded[key]
    ]


def step_result_unique(s: Snapshot) -> list:
    """At most one step row per (workflow_id, seq), never updated or deleted (the append-only
    trigger enabled, the primary key holding)."""
    out = []
    seen = set()
    for st in s.steps:
        key = (st["workflow_id"], st["seq"])
        if key in seen:
            out.append(violation(duplicate=list(key)))
        seen.add(key)
    if s.triggers.get("steps_append_only") not in ("O", "A"):
        out.append(violation(trigger="steps_append_only", state=s.triggers.get("steps_append_only", "missing")))
    return out


def fenced_writes(s: Snapshot) -> list:
    """Every worker write carried an epoch that was current at its commit: step rows and
    journal entries fall inside their epoch's claim window (late-commit CAS excepted)."""
    windows = s.claim_windows()
    out = []
    for st in s.steps:
        w = windows.get((st["workflow_id"], st["epoch"]))
        if w is None or not (w[0] <= st["ts"] < w[1]):
            out.append(violation(step=[st["workflow_id"], st["seq"]], epoch=st["epoch"], at=st["ts"], window=w))
    for eid, entries in s.journal.items():
        for e in entries:
            by: Any = e.get("by") or {}  # journal JSON: a missing id finds no window (a violation)
            if not by or e.get("via") == "late-commit" or e.get("kind") == "LATE_RESULT":
                continue
            w = windows.get((by.get("workflow_id"), by.get("epoch")))
            if w is None or not (w[0] <= e.get("ts", 0) < w[1]):
                out.append(violation(effect_id=eid, kind=e.get("kind"), by=by, ts=e.get("ts"), window=w))
    return out


def _takeovers_before_expiry(s: Snapshot) -> list:
    return [
        violation(
            workflow_id=c["workflow_id"],
            epoch=c["epoch"],
            owner=c["owner"],
            claimed_at=c["claimed_at"],
            previous_lease_expired_at=c["prev_lease_expires_at"],
        )
        for c in s.claims
        if c["prev_status"] == "running"
        and (c["prev_lease_expires_at"] is None or c["claimed_at"] < c["prev_lease_expires_at"])
    ]


def lease_mutex(s: Snapshot) -> list:
    """Two workers never both hold a non-expired claim: every claim of a running workflow came
    after the holder's lease (renewals included) had expired."""
    return _takeovers_before_expiry(s)


def takeover_only_after_expiry(s: Snapshot) -> list:
    """Claiming a running workflow succeeds only when lease_expires_at <= now()."""
    return _takeovers_before_expiry(s)
