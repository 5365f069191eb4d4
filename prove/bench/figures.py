"""The cost of the operations figures (``ilr._telemetry.figures.figures_on``, issue 46):
``python manage.py bench_figures [--workflows N] [--rounds R]``.

On a fresh database (``ilr_bench_figures``), N workflows in the shares of a busy system
(prove.queries.FIGURES_SEED_WORKFLOWS: 5% due, 1% running, 0.5% stuck...), an effect per
completed one (0.1% ambiguous), approval requests, released slots and 1000 schedules; then
ANALYZE. Reported: each statement's plan (EXPLAIN ANALYZE: its execution time, the scans it
makes and whether any is a sequential scan of a large table), and ``figures_on`` timed over R
rounds (p50, p99: one gauge read, its round trips included), interleaved A/B with and without the
two partial indexes of migration 0022 (dropped in a transaction that is rolled back). Figures are this
machine's, which is shared and noisy.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ilr import _db as db
from ilr._queries import figures as q
from ilr._telemetry.figures import STUCK_AFTER, figures_on
from prove.bench.core import fresh_database
from prove.queries.figures import (
    FIGURES_DROP_INDEXES,
    FIGURES_SEED_APPROVALS,
    FIGURES_SEED_DEPLOYMENTS,
    FIGURES_SEED_EFFECTS,
    FIGURES_SEED_SCHEDULES,
    FIGURES_SEED_SLOTS,
    FIGURES_SEED_WORKFLOWS,
)

ROOT = Path(__file__).resolve().parents[2]
BENCH_DB = "ilr_bench_figures"
RESULTS = ROOT / "results" / "figures_cost"
STATEMENTS = {
    "counts": q.FIGURES_COUNTS_SQL,
    "due": q.FIGURES_DUE_SQL,
    "unserved": q.FIGURES_UNSERVED_SQL,
    "workers": q.FIGURES_WORKERS_SQL,
    "keys": q.FIGURES_KEYS_SQL,
    "queues": q.FIGURES_QUEUES_SQL,
    "oldest_approvals": q.FIGURES_OLDEST_APPROVALS_SQL,
    "ambiguous": q.FIGURES_AMBIGUOUS_SQL,
    "stuck": q.FIGURES_STUCK_SQL,
}
PARAMS = {"stuck_after": STUCK_AFTER, "schedule_grace": 30.0, "items": 10, "keys": ["queue:bulk"]}


def seed(conn, n: int) -> None:
    """Write the bench's rows (prove.queries.FIGURES_SEED_*), then ANALYZE."""
    conn.execute(FIGURES_SEED_DEPLOYMENTS)
    for sql in (FIGURES_SEED_WORKFLOWS, FIGURES_SEED_EFFECTS, FIGURES_SEED_APPROVALS, FIGURES_SEED_SLOTS):
        conn.execute(sql, {"n": n})
    conn.execute(FIGURES_SEED_SCHEDULES)
    conn.execute("analyze")


def _scans(node: dict, out: list[str]) -> list[str]:
    """Every scan node of a JSON plan: "Index Scan using wf_due on workflows" and the like."""
    kind = node.get("Node Type", "")
    if "Scan" in kind and "Relation Name" in node:
        using = f" using {node['Index Name']}" if node.get("Index Name") else ""
        out.append(f"{kind}{using} on {node['Relation Name']}")
    for child in node.get("Plans", []):
        _scans(child, out)
    return out


def explain(conn) -> dict:
    """{statement: {"ms": execution time, "scans": [...], "seq_scans": [...]}} of one EXPLAIN ANALYZE each."""
    out = {}
    for name, sql in STATEMENTS.items():
        plan = conn.execute("explain (analyze, buffers, format json) " + sql, PARAMS).fetchone()
        top = next(iter(plan.values()))[0]
        scans = _scans(top["Plan"], [])
        out[name] = {
            "ms": round(top["Execution Time"], 3),
            "scans": sorted(set(scans)),
            "seq_scans": sorted({s for s in scans if s.startswith("Seq Scan")}),
        }
    return out


def _timed(conn, rounds: int) -> list[float]:
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        figures_on(conn, queues={"bulk": {"concurrency": 2}})
        times.append((time.perf_counter() - t) * 1000)
    return times


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))], 3)


def run(workflows: int = 100_000, rounds: int = 200, out=sys.stdout) -> dict:
    """Seed, explain, time; returns the figures (also written to ``out`` as JSON)."""
    base = db.conninfo()
    fresh_database(BENCH_DB)
    dsn = base.replace(f"dbname={base.split('dbname=')[1].split()[0]}", f"dbname={BENCH_DB}")
    with db.connect(dsn) as conn:
        seed(conn, workflows)
        figures = figures_on(conn)
        plans = explain(conn)
        # A/B, interleaved in blocks of 20 rounds: with the indexes of migration 0022, then
        # without them (dropped inside a transaction that is rolled back, so the next block has them).
        without: list[float] = []
        with_ix: list[float] = []
        plans_without = {}
        for _ in range(max(1, rounds // 20)):
            with_ix += _timed(conn, 20)
            conn.execute("begin")
            try:
                conn.execute(FIGURES_DROP_INDEXES)
                without += _timed(conn, 20)
                plans_without = explain(conn)
            finally:
                conn.execute("rollback")
    result = {
        "workflows": workflows,
        "rounds": len(without),
        "figures": {
            "approvals_pending": figures.approvals_pending,
            "effects_ambiguous": figures.effects_ambiguous,
            "workflows_stuck": figures.workflows_stuck,
            "due_total": figures.due_total,
            "runs_held": figures.runs_held,
        },
        "read_ms_p50": _pct(without, 50),
        "read_ms_p99": _pct(without, 99),
        "read_ms_mean": round(statistics.fmean(without), 3),
        "with_indexes_read_ms_p50": _pct(with_ix, 50),
        "with_indexes_read_ms_p99": _pct(with_ix, 99),
        "plans": plans_without,
        "plans_with_indexes": plans,
        "indexes": list(q.FIGURES_INDEXES),
    }
    out.write(json.dumps({k: v for k, v in result.items() if not k.startswith("plans")}) + "\n")
    return result


def write_results(result: dict, command: str, name: str = "figures_cost") -> None:
    """Write results/<name>.json and results/<name>.md."""
    path = RESULTS.with_name(name)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    load = os.getloadavg()[0]  # the shared machine's load when the results were written
    machine = f"{os.cpu_count()} cores, load average {load:.1f}"
    r = {**result, "command": command, "commit": commit or "unknown", "machine": machine}
    path.with_suffix(".json").write_text(json.dumps(r, indent=2) + "\n")
    lines = [
        "# The operations figures' cost",
        "",
        f"Made by `{command}` at {r['commit']} on {r['machine']} (shared, noisy): {r['workflows']} workflows "
        f"(figures read: {json.dumps(r['figures'])}). One `figures_on` (nine statements in one transaction, "
        "its round trips included) timed over "
        f"{r['rounds']} rounds, interleaved in blocks of 20 with rounds on the same database with the two "
        "partial indexes of migration 0022 dropped (in a rolled-back transaction).",
        "",
        "| | figures_on p50 (ms) | p99 (ms) |",
        "|---|---|---|",
        f"| schema as shipped (migration 0022's indexes) | {r['with_indexes_read_ms_p50']} | "
        f"{r['with_indexes_read_ms_p99']} |",
        f"| without the two indexes | {r['read_ms_p50']} | {r['read_ms_p99']} |",
        "",
        "Each statement once under EXPLAIN ANALYZE (without the indexes; as shipped, with them):",
        "",
        "| statement | ms | scans | ms with indexes | sequential scans with indexes |",
        "|---|---|---|---|---|",
    ]
    for name, p in r["plans"].items():
        w = r["plans_with_indexes"].get(name, {})
        lines.append(
            f"| {name} | {p['ms']} | {'; '.join(p['scans'])} | {w.get('ms', '')} | "
            f"{'; '.join(w.get('seq_scans', [])) or 'none'} |"
        )
    lines += [
        "",
        "The indexes (migration 0022): " + ", ".join(r["indexes"]) + ".",
        "",
    ]
    path.with_suffix(".md").write_text("\n".join(lines))
