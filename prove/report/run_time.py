"""Where a Prove run's wall time goes (issue 24, docs/protocol.md §16.4): the phases of each run,
read from its run.json (the harness's own fault log and latencies), summed per system and per
scenario.

The phases, in seconds on the harness's monotonic clock:

- setup: from the run's start to its first system action (the first worker start or workflow
  start): the target and the model stub processes, the lane database reset, the system's driver;
- to approval: from the workflow start to the first approve: worker boot and the decide step,
  plus any fault the scenario injects before the approval;
- approval to outcome: the scenario's faults and the recovery (lease expiry, send deadline and
  settle margin, restarts), up to the system's reported outcome;
- after outcome: the scenario's quiesce wait, the oracle's reads, the system's records and the
  teardown of every process.

Runs with no approval (a harness error, S14) count in "runs" but not in the phases.

``python -m prove.report.run_time [--runs DIR] [--sweep ID ...] [--out FILE]`` writes the tables
as markdown (default results/prove_run_time.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("setup", "to approval", "approval to outcome", "after outcome")


def phases(run: dict) -> dict | None:
    """The four phases of one run (seconds), or None when the run has no start, approve or
    outcome to split at."""
    faults = run.get("faults") or []
    first = next((f["t"] for f in faults if f["what"] in ("worker_start", "start")), None)
    start = next((f["t"] for f in faults if f["what"] == "start"), None)
    approve = next((f["t"] for f in faults if f["what"] == "approve"), None)
    to_outcome = (run.get("latency") or {}).get("start_to_outcome_s")
    if None in (first, start, approve, to_outcome) or not run.get("wall_s"):
        return None
    outcome = start + to_outcome
    return {
        "setup": first,
        "to approval": approve - first,
        "approval to outcome": outcome - approve,
        "after outcome": run["wall_s"] - outcome,
    }


def load(runs_dir: Path, sweeps: list[str]) -> list[dict]:
    """Every run.json under ``runs_dir`` whose run id holds one of ``sweeps`` (all when empty)."""
    out = []
    for path in sorted(runs_dir.glob("*/run.json")):
        if sweeps and not any(s in path.parent.name for s in sweeps):
            continue
        out.append(json.loads(path.read_text()))
    return out


def _rows(groups: dict[str, list[dict]]) -> list[str]:
    rows = []
    for key in sorted(groups):
        rs = groups[key]
        split = [p for p in map(phases, rs) if p]
        wall = statistics.mean(r["wall_s"] for r in rs)
        cols = []
        for name in PHASES:
            vals = [p[name] for p in split]
            mean = statistics.mean(vals) if vals else 0.0
            cols.append(f"{mean:.1f} ({mean / wall:.0%})" if vals else "-")
        load = statistics.median((r.get("load") or {}).get("start", 0) for r in rs)
        rows.append(f"| {key} | {len(rs)} | {wall:.1f} | " + " | ".join(cols) + f" | {load:.1f} |")
    return rows


def markdown(runs: list[dict], command: str) -> str:
    """The report: one table per system, one per scenario; means in seconds with their share of
    the mean wall time."""
    head = "| {} | runs | mean wall s | " + " | ".join(f"{p} s (share)" for p in PHASES) + " | median load at start |"
    rule = "|---" * (4 + len(PHASES)) + "|"
    by_system, by_scenario = defaultdict(list), defaultdict(list)
    for r in runs:
        by_system[r["system"]].append(r)
        by_scenario[r["scenario"] + (f" {r['variant']}" if r.get("variant") else "")].append(r)
    total = sum(r["wall_s"] for r in runs)
    lines = [
        "# Where a Prove run's time goes",
        "",
        f"Written by `{command}`; never edited by hand. {len(runs)} runs, {total:.0f} s of run wall "
        "time summed (lanes ran at the same time). The phases are defined in prove/report/run_time.py: "
        "setup (target, model stub, lane database, driver), to approval (worker boot and the decide "
        "step), approval to outcome (the scenario's faults and the recovery), after outcome (quiesce, "
        "the oracle's reads, records, teardown).",
        "",
        "## By system",
        "",
        head.format("system"),
        rule,
        *_rows(by_system),
        "",
        "## By scenario",
        "",
        head.format("scenario"),
        rule,
        *_rows(by_scenario),
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prove.report.run_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default=str(ROOT / ".data" / "prove" / "runs"), help="the runs directory")
    parser.add_argument("--sweep", action="append", default=[], help="a sweep id the run ids hold (repeatable)")
    parser.add_argument("--out", default=str(ROOT / "results" / "prove_run_time.md"))
    args = parser.parse_args(argv)
    runs = load(Path(args.runs), args.sweep)
    if not runs:
        print(f"no run.json under {args.runs} for {args.sweep or 'any sweep'}", file=sys.stderr)
        return 2
    command = "python -m prove.report.run_time " + " ".join(argv if argv is not None else sys.argv[1:])
    Path(args.out).write_text(markdown(runs, command.strip()))
    print(f"wrote {args.out} ({len(runs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
