"""The failing runs kept in the source tree: up to 20 per cell, one JSON-lines file per cell
(``results/runtime_prove_failures/<cell>.jsonl``), each line a run record with its attempt log
inline. The full per-run records stay under .data/prove/runs/ and in the shards.

    python -m prove.harness.failures results/runtime_prove_failures   # compact an older copy

rewrites a directory in the older layout (a folder per cell, a file per run) into this one.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from prove.harness.cell_run import RUNS_DIR

MAX_FAILURES_PER_CELL = 20


def cell_key(rec: dict) -> str:
    """The cell of a run record: scenario[-variant]-t<tier>-<system>."""
    return f"{rec['scenario']}{'-' + rec['variant'] if rec['variant'] else ''}-t{rec['tier']}-{rec['system']}"


def _line(rec: dict, attempts: Path) -> str:
    lines = attempts.read_text().splitlines() if attempts.exists() else []
    return json.dumps({**rec, "attempts": [json.loads(x) for x in lines if x.strip()]}, default=str)


def copy_failures(runs: list[dict], failures: Path, runs_dir: Path = RUNS_DIR) -> None:
    """Write up to 20 failing runs per cell to ``failures``/<cell>.jsonl, replacing the old copy."""
    if failures.exists():
        shutil.rmtree(failures)
    per_cell: dict[str, list[str]] = {}
    for rec in runs:
        if rec.get("correct"):
            continue
        kept = per_cell.setdefault(cell_key(rec), [])
        if len(kept) < MAX_FAILURES_PER_CELL:
            kept.append(_line(rec, runs_dir / rec["run_id"] / "attempts.jsonl"))
    if per_cell:
        failures.mkdir(parents=True, exist_ok=True)
    for key, lines in sorted(per_cell.items()):
        (failures / f"{key}.jsonl").write_text("\n".join(lines) + "\n")


def compact(failures: Path) -> int:
    """Rewrite ``failures`` from the older layout (<cell>/<run_id>.json and
    <run_id>.attempts.jsonl) into <cell>.jsonl files, in run id order. Returns the runs kept."""
    total = 0
    for folder in sorted(p for p in failures.iterdir() if p.is_dir()):
        lines = []
        for path in sorted(folder.glob("*.json")):
            rec = json.loads(path.read_text())
            lines.append(_line(rec, folder / f"{path.stem}.attempts.jsonl"))
        if lines:
            (failures / f"{folder.name}.jsonl").write_text("\n".join(lines) + "\n")
        total += len(lines)
        shutil.rmtree(folder)
    return total


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m prove.harness.failures DIRECTORY")
    print(f"{sys.argv[1]}: {compact(Path(sys.argv[1]))} failing runs, one file per cell")
