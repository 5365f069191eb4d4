"""results/runtime_prove.md rendered from templates/runtime_prove.md (a Django template, autoescape
off): the prose is the template's, the figures come from the report's JSON document."""

from __future__ import annotations

from pathlib import Path

from django.template import Context, Engine

from prove.harness.scenarios import SYSTEMS
from prove.report import RESULTS, ROOT
from prove.report.cells import (
    LABEL,
    _cell_text,
    fmt_lat,
    full_sweep_estimate,
    latency_values,
    per_thousand,
    timer_lateness,
)
from prove.report.tlc_xref import assumption_rows, xref_rows

ENGINE = Engine(dirs=[str(Path(__file__).resolve().parent / "templates")], autoescape=False)
VERSION_KEYS = ("python", "django", "postgresql", "temporalio", "temporal_cli", "dbos", "anthropic", "git")


def _name(scenario: str, variant: str) -> str:
    return scenario + (f" {variant}" if variant else "")


def _main_rows(doc: dict) -> list[dict]:
    return [
        {
            "name": _name(row["scenario"], row["variant"]),
            "title": row["title"],
            "tier": str(row["tier"]),
            "cells": " | ".join(_cell_text(row["cells"][s]) for s in SYSTEMS),
            "verdict_a": row["verdict_a"],
            "verdict_b": row["verdict_b"],
            "verdict_c": row.get("verdict_c", "-"),
            "preds": " / ".join((p["text"] if p else "-") for p in row["predicted"].values()),
        }
        for row in doc["rows"]
    ]


def _scenarios(doc: dict) -> list[dict]:
    """Each scenario (and variant) once, in the main table's order."""
    seen: dict = {}
    for row in doc["rows"]:
        seen.setdefault(
            (row["scenario"], row["variant"]),
            {"name": _name(row["scenario"], row["variant"]), "fault": row["fault"], "oracle": row["oracle"]},
        )
    return list(seen.values())


def _disagreements(doc: dict) -> list[dict]:
    return [
        {
            "name": _name(d["scenario"], d["variant"]),
            "tier": str(d["tier"]),
            "system": LABEL[d["system"]],
            "predicted": d["predicted"],
            "correct": "correct" if d["predicted_correct"] else "incorrect",
            "measured": d["measured"],
            "diagnosis": d["diagnosis"],
            "failing": ", ".join(d["failing_runs"][:5]) or "-",
        }
        for d in doc["disagreements"]
    ]


def _latency_rows(doc: dict) -> list[tuple[str, str]]:
    """(measure, its p50 / p99 (count) column per system joined) for the latency table."""
    rows = []
    for label, metric, filt in (
        (
            "no-fault approve→outcome (L0, tier 1, 20 ms service delay)",
            "latency_approve_to_outcome_s",
            lambda c: c["scenario"] == "L0",
        ),
        (
            "resume after a restart of the workers ("
            + ", ".join(
                sorted(
                    {
                        _name(c["scenario"], c["variant"])
                        for c in doc["cells"].values()
                        if c["latency_resume_s"]["count"]
                    }
                )
            )
            + ")",
            "latency_resume_s",
            lambda c: True,
        ),
    ):
        cols = []
        for s in SYSTEMS:
            vals = []
            for c in doc["cells"].values():
                if c["system"] == s and filt(c):
                    vals += latency_values(doc, c, metric)
            cols.append(fmt_lat(vals))
        rows.append((label, " | ".join(cols)))
    return rows


def _shard_rows(doc: dict) -> list[dict]:
    """One row per shard the report was rebuilt from (empty for a report of one sweep)."""
    return [
        {
            "shard": m["shard"],
            "seeds": f"{m['first_seed']}..{m['last_seed']}",
            "runs": str(m["runs"]),
            "counted": str(m.get("counted", m["runs"])),
            "wall_s": f"{m['wall_s']:.0f}",
            "git": str(m.get("git")) + (" (uncommitted changes)" if m.get("dirty_tree") else ""),
            "command": m["command"],
        }
        for m in doc["header"]["selection"].get("shards") or []
    ]


def _speedup(doc: dict, est: dict) -> dict:
    """How much faster than one at a time the shards ran: their runs' summed wall time over the
    elapsed time the shards covered (the header's wall time, shards.elapsed: two at once count
    once), and the missing runs' hours at that rate. Empty without shards."""
    shards = doc["header"]["selection"].get("shards") or []
    wall = doc["header"]["wall_s"] if shards else 0
    run_s = sum((c.get("mean_wall_s") or 0) * c["n"] for c in doc["cells"].values())
    if not wall or not run_s:
        return {"speedup": "", "remaining_wall": ""}
    x = run_s / wall
    return {"speedup": f"{x:.1f}", "remaining_wall": f"{est['total_h'] / x:.1f}"}


def render_md(doc: dict, a_src: str, b_src: str, c_src: str, tlc_present: bool) -> str:
    """The markdown of results/runtime_prove.md for the JSON document ``doc``; ``a_src`` and
    ``b_src`` are the two Temporal activity bodies, ``c_src`` the DBOS step and workflow, quoted."""
    h = doc["header"]
    v = h["versions"]
    timer = timer_lateness(doc)
    bench = RESULTS / "runtime_bench_core.md"
    est = full_sweep_estimate(doc)
    context = {
        "h": h,
        "seeds": str(h["seeds_per_cell"]),
        "runs": str(h["runs"]),
        "wall_s": f"{h['wall_s']:.0f}",
        "summed": " (the time the commands above covered, two at once counted once)" if " ; " in h["command"] else "",
        "v": {k: str(v.get(k)) for k in VERSION_KEYS},
        # A rebuild from shards marks the commit that had uncommitted changes in the git list itself
        # (shards.provenance).
        "dirty": " (uncommitted changes)" if v.get("dirty_tree") and not h["selection"].get("shards") else "",
        "t": {k: str(x) for k, x in h["timeouts"].items()},
        "n_not_run": str(len(h["not_run"])),
        "not_run": "; ".join(h["not_run"]),
        "main_rows": _main_rows(doc),
        "per_thousand": per_thousand(doc),
        "scenarios": _scenarios(doc),
        "disagreements": _disagreements(doc),
        "unstated": [
            {
                "name": _name(d["scenario"], d["variant"]),
                "tier": str(d["tier"]),
                "system": LABEL[d["system"]],
                "read": "correct" if d["read_as_correct"] else "incorrect",
                "measured": d["measured"],
                "held": f"**{d['not_as_read']} of {d['n']} runs not as read**" if d["not_as_read"] else "as read",
            }
            for d in doc.get("unstated", [])
        ],
        "dbos_vs_b": [
            {
                "name": _name(d["scenario"], d["variant"]),
                "tier": str(d["tier"]),
                "b": d["b"],
                "c": d["c"],
                "apart": "intervals apart" if d["apart"] else "intervals overlap",
                "diagnosis": d["diagnosis"][:1].upper() + d["diagnosis"][1:],
            }
            for d in doc.get("dbos_vs_b", [])
        ],
        "latency_rows": _latency_rows(doc),
        "timer_cols": " | ".join(fmt_lat(timer.get(s, [])) for s in SYSTEMS),
        "bench": str(bench.relative_to(ROOT)) if bench.exists() else "",
        "sweep_rows": [(name, per, str(runs), f"{hours:.2f}") for name, per, runs, hours in est["rows"]],
        "sweep_total": f"{est['total_h']:.1f}",
        "missing_runs": str(est["missing_runs"]),
        "shard_rows": _shard_rows(doc),
        "version_check": h["selection"].get("version_check"),
        **_speedup(doc, est),
        "coverage": h["coverage"],
        "tlc_present": tlc_present,
        "xref_rows": xref_rows(doc, tlc_present),
        "assumption_rows": assumption_rows(doc) if tlc_present else [],
        "a_src": a_src.rstrip(),
        "b_src": b_src.rstrip(),
        "c_src": c_src.rstrip(),
    }
    return ENGINE.get_template("runtime_prove.md").render(Context(context, autoescape=False))
