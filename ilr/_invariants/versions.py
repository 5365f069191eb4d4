"""Invariants of versions, determinism and forks (docs/protocol.md §11)."""

from __future__ import annotations

from collections import defaultdict

from ilr._invariants.snapshot import Snapshot, violation


def version_pinned(s: Snapshot) -> list:
    """Every claim (so every step) of a workflow ran on a worker registered for its version:
    claims between two ``$migrate`` claims share one version, and the claims since the last
    migration match the workflow's current version. $recovery and $fork claims run no code."""
    out = []
    by_wf: dict[str, list[dict]] = defaultdict(list)
    for c in s.claims:
        if c["workflow_id"] in s.workflows and c["owner"] not in ("$recovery", "$fork"):
            by_wf[c["workflow_id"]].append(c)
    for wf_id, claims in by_wf.items():
        segments: list[list[dict]] = [[]]
        for c in claims:
            if c["owner"] == "$migrate":
                segments.append([c])
            else:
                segments[-1].append(c)
        for i, seg in enumerate(segments):
            expected = s.workflows[wf_id]["version"] if i == len(segments) - 1 else (seg[0]["version"] if seg else None)
            for c in seg:
                if expected is not None and c["version"] != expected:
                    out.append(
                        violation(
                            workflow_id=wf_id, epoch=c["epoch"], claimed_version=c["version"], expected_version=expected
                        )
                    )
    return out


def non_determinism_loud(s: Snapshot) -> list:
    """A workflow stuck on NonDeterminism ran nothing at or past the mismatching seq in that run."""
    out = []
    for wf in s.workflows.values():
        err = wf["error"] or {}
        if wf["status"] != "stuck" or err.get("type") != "NonDeterminism":
            continue
        ran = [
            st["seq"]
            for st in s.steps
            if st["workflow_id"] == wf["id"] and st["seq"] >= err.get("seq", 0) and st["epoch"] >= wf["epoch"]
        ]
        if ran:
            out.append(violation(workflow_id=wf["id"], mismatch_seq=err.get("seq"), recorded_after=ran))
    return out


def fork_never_resends(s: Snapshot) -> list:
    """Nothing dispatches an effect after it committed (a fork reaching a committed effect gets
    DUPLICATE_IGNORED and sends nothing)."""
    out = []
    for eid, entries in s.journal.items():
        committed = False
        for e in entries:
            if e.get("kind") == "COMMITTED":
                committed = True
            elif e.get("kind") == "DISPATCHED" and committed:
                out.append(violation(effect_id=eid, by=e.get("by")))
    return out
