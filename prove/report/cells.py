"""The cells of results/runtime_prove.md (docs/protocol.md §16.4): per (scenario, variant, tier,
system) the correct count with its 95% Wilson interval, the oracle's sums, latencies and audit
scores; the verdict rule; and the figures summed over cells (per 1,000 runs, the full-sweep
estimate)."""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict

from prove.harness.audit import rescored
from prove.harness.scenarios import SYSTEMS

LABEL = {"runtime": "runtime", "temporal": "(a) temporal", "temporal_check": "(b) temporal_check", "dbos": "(c) dbos"}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    i = min(len(v) - 1, max(0, math.ceil(q / 100 * len(v)) - 1))
    return v[i]


def aggregate(runs: list[dict]) -> dict:
    """Per cell (scenario|variant|tier|system) aggregates (docs/protocol.md §16.4)."""
    cells: dict[str, dict] = {}
    groups = defaultdict(list)
    for r in runs:
        # Every run is scored by the current ground-truth rule, whichever commit recorded it.
        r = {**r, "audit": rescored(r)}
        groups[(r["scenario"], r["variant"], r["tier"], r["system"])].append(r)
    for (sid, var, tier, system), rs in groups.items():
        n = len(rs)
        k = sum(1 for r in rs if r.get("correct"))
        lo, hi = wilson(k, n)
        sums = defaultdict(int)
        for r in rs:
            for key, val in (r.get("oracle") or {}).items():
                if isinstance(val, (int, float)) and not isinstance(val, bool):
                    sums[key] += val
        lat = [
            r["latency"].get("approve_to_outcome_s")
            for r in rs
            if r.get("latency", {}).get("approve_to_outcome_s") is not None
        ]
        resume = [r["latency"].get("resume_s") for r in rs if r.get("latency", {}).get("resume_s") is not None]
        scores = [r["audit"].get("score") for r in rs if r["audit"].get("score") is not None]
        cells[f"{sid}|{var}|{tier}|{system}"] = {
            "scenario": sid,
            "variant": var,
            "tier": tier,
            "system": system,
            "n": n,
            "correct": k,
            "rate": k / n if n else None,
            "wilson95": [round(lo, 3), round(hi, 3)],
            "sums": dict(sums),
            "blocked_never_sent": sum(r.get("blocked_never_sent", 0) for r in rs),
            "duplicates": sums.get("duplicates", 0),
            "errors": sum(1 for r in rs if r.get("error")),
            "no_outcome": sum(1 for r in rs if r.get("no_outcome")),
            "can_prove_mean": round(statistics.mean(scores), 2) if scores else None,
            "false_claims": sum(r["audit"].get("false_claims", 0) for r in rs),
            "false_claims_per_1000": round(1000 * sum(r["audit"].get("false_claims", 0) for r in rs) / n, 1),
            "latency_approve_to_outcome_s": {
                "p50": pct(lat, 50),
                "p99": pct(lat, 99),
                "count": len(lat),
                "values": lat,
            },
            "latency_resume_s": {"p50": pct(resume, 50), "p99": pct(resume, 99), "count": len(resume)},
            "_resume_values": resume,
            "outcomes": sorted({str((r.get("outcome") or {}).get("status")) for r in rs}),
            "totals": sorted({(r.get("oracle") or {}).get("total_refunded") for r in rs}, key=lambda x: (x is None, x)),
            "failing_runs": [r["run_id"] for r in rs if not r.get("correct")],
            "mean_wall_s": round(statistics.mean([r.get("wall_s", 0) for r in rs]), 1),
            "extra": [r.get("extra") for r in rs if r.get("extra")],
        }
    return cells


def intervals_apart(a: dict, b: dict) -> bool:
    """True when the 95% Wilson intervals of two cells' correct counts do not overlap."""
    (alo, ahi), (blo, bhi) = a["wilson95"], b["wilson95"]
    return alo > bhi or ahi < blo


def verdict(rt: dict, other: dict) -> str:
    """The verdict of the runtime's cell ``rt`` against a baseline's cell ``other`` (docs/protocol.md
    §16.4): "better", "worse" or "equal" by the 95% Wilson intervals of the correct counts, with
    notes beside it: fewer or more duplicates, worse availability (more blocked-never-sent), and
    "its failures: no outcome" when every failing run of ``other`` reported no outcome in time."""
    if not rt or not other:
        return "-"
    apart = intervals_apart(rt, other)
    if rt["correct"] / rt["n"] > other["correct"] / other["n"] and apart:
        v = "better"
    elif rt["correct"] / rt["n"] < other["correct"] / other["n"] and apart:
        v = "worse"
    else:
        v = "equal"
    notes = []
    rd = rt["duplicates"] / rt["n"]
    od = other["duplicates"] / other["n"]
    if rd < od:
        notes.append("fewer duplicates")
    elif rd > od:
        notes.append("more duplicates")
    if rt["blocked_never_sent"] / rt["n"] > other["blocked_never_sent"] / other["n"]:
        notes.append("worse (availability)")
    failed = other["n"] - other["correct"]
    if failed and other.get("no_outcome", 0) == failed:
        # Counted incorrect by the 90 s rule, not by the ledger: an availability failure.
        notes.append("its failures: no outcome")
    return v + (f" ({', '.join(notes)})" if notes else "")


def _cell_text(c: dict | None) -> str:
    if c is None:
        return "not run"
    rate = 100 * c["correct"] / c["n"]
    err = f", {c['errors']} harness err" if c["errors"] else ""
    return (
        f"{rate:.0f}% ({c['n']}) dup {c['duplicates']} blk {c['blocked_never_sent']} "
        f"prove {'-' if c['can_prove_mean'] is None else c['can_prove_mean']}/5{err}<br>"
        f"${_totals(c)} {', '.join(c['outcomes'])}"
    )


def _totals(c):
    return "/".join("?" if t is None else f"{t / 100:g}" for t in c["totals"])


def measured(c: dict) -> str:
    """One cell's measurement in words: correct of n, the ledger totals seen ($), the outcomes the
    system reported and its duplicate applications."""
    return (
        f"{c['correct']}/{c['n']} correct; totals ${_totals(c)}; "
        f"outcomes {', '.join(c['outcomes'])}; duplicates {c['duplicates']}"
    )


def latency_values(doc, c, metric):
    if metric == "latency_approve_to_outcome_s":
        return [x for x in c[metric].get("values", []) if x is not None]
    return list(c.get("_resume_values", []))


def fmt_lat(vals):
    if not vals:
        return "-"
    return f"{pct(vals, 50):.2f} s / {pct(vals, 99):.2f} s ({len(vals)})"


def timer_lateness(doc):
    out = defaultdict(list)
    for c in doc["cells"].values():
        if c["scenario"] == "S10":
            for e in c["extra"]:
                if e.get("timer_lateness_after_return_s") is not None:
                    out[c["system"]].append(e["timer_lateness_after_return_s"])
    return out


def per_thousand(doc) -> str:
    parts = []
    for s in SYSTEMS:
        cs = [c for c in doc["cells"].values() if c["system"] == s]
        n = sum(c["n"] for c in cs)
        if not n:
            continue

        def k(name, cs=cs, n=n):
            return round(1000 * sum(c["sums"].get(name, 0) for c in cs) / n, 1)

        blocked = round(1000 * sum(c["blocked_never_sent"] for c in cs) / n, 1)
        fc = round(1000 * sum(c["false_claims"] for c in cs) / n, 1)
        parts.append(
            f"{LABEL[s]}: duplicates {k('duplicates')}, wrong amounts {k('wrong_amounts')}, "
            f"sends after revoke {k('sends_after_revoke')} (not in the revoke's in-flight list "
            f"{k('sends_after_revoke_unlisted')}), sends on changed premises "
            f"{k('sends_on_changed_premises')}, blocked_never_sent {blocked}, false claims {fc} (n={n})"
        )
    return "; ".join(parts)


FULL_N = 30
"""Seeds per cell in the full sweep (docs/protocol.md §16.4); S14 runs once per system."""


def coverage(cells: dict) -> dict:
    """How far the cells are from the full sweep: the smallest and largest n, and each cell (S14
    excepted) still below FULL_N as ``"S05 t2 dbos: 5"``."""
    counted = [c for _, c in sorted(cells.items()) if c["scenario"] != "S14"]
    by_n = Counter(c["n"] for c in counted)
    return {
        "target": FULL_N,
        "cells": len(counted),
        "by_n": ", ".join(f"n = {n} in {k} cells" for n, k in sorted(by_n.items())),
        "min_n": min(by_n, default=0),
        "max_n": max(by_n, default=0),
        "below_target": [
            f"{c['scenario']}{' ' + c['variant'] if c['variant'] else ''} t{c['tier']} {c['system']}: {c['n']}"
            for c in counted
            if c["n"] < FULL_N
        ],
    }


def full_sweep_estimate(doc: dict) -> dict:
    """Per scenario key: mean wall seconds per run per system, the runs still missing to reach
    FULL_N in every cell, and their hours run one at a time."""
    walls = defaultdict(lambda: defaultdict(list))
    missing: dict = defaultdict(int)
    for c in doc["cells"].values():
        if c["scenario"] == "S14":
            continue
        key = c["scenario"] + (f" {c['variant']}" if c["variant"] else "")
        walls[key][c["system"]].append(c.get("mean_wall_s") or 0)
        missing[key] += max(0, FULL_N - c["n"])
    rows, total = [], 0.0
    for key in walls:
        means = {s: (statistics.mean(v) if v else 0) for s, v in walls[key].items()}
        per_run = statistics.mean(means.values()) if means else 0
        hours = per_run * missing[key] / 3600
        total += hours
        per = " / ".join(f"{means[s]:.0f}" if s in means else "-" for s in SYSTEMS)
        rows.append((key, per, missing[key], hours))
    return {"rows": rows, "total_h": total, "missing_runs": sum(missing.values())}


def derive_s10_temporal(runs: list[dict]) -> None:
    """S10, Temporal: the server fires the timer on time even with every worker down, so the
    comparable moment is when the workflow resumed after it: the first refund activity attempt
    (the worker's attempt log). Lateness after the workers' return = that moment minus the later
    of the timer's due time and the restart. Derived from each run's stored records."""
    for r in runs:
        if (
            r.get("scenario") != "S10"
            or r.get("system") not in ("temporal", "temporal_check")
            or not isinstance(r.get("records"), dict)
        ):
            continue
        hs = r["records"].get("histories") or []
        st = [t for t in (hs[-1].get("timer_started", []) if hs else []) if abs(t["seconds"] - 20) < 1]
        first = next((a["t_wall"] for a in r["records"].get("attempts") or [] if a.get("activity") == "refund"), None)
        restart = next((f["wall"] for f in r.get("faults", []) if f["what"] == "restart"), None)
        if st and first is not None and restart is not None:
            r.setdefault("extra", {})["timer_lateness_after_return_s"] = round(
                first - max(st[0]["t"] + st[0]["seconds"], restart), 3
            )
