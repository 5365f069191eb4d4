"""Resumable sweeps (docs/protocol.md §16.4): a shard's runs as compact lines under results/, and the
report rebuilt from every shard.

``manage.py prove --shard [--first-seed K] [--seeds N] ...`` runs seeds K..K+N-1 and writes
``results/prove_runs/<sweep id>.jsonl`` (one line per run: what the report reads, not the ledger,
access log or records) and ``<sweep id>.meta.json`` (the command, the wall time, the seeds, the
commit, and the versions of Python, PostgreSQL and the SDKs the runs used). ``manage.py prove
--from-shards`` rebuilds results/runtime_prove.md from every shard there: a cell's n counts every
shard's runs; when two shards ran the same (cell, seed), the later one wins.
Shards can run in different sessions and on different days; each is committed with its command.
"""

from __future__ import annotations

import calendar
import json
import time
from pathlib import Path

SHARDS_DIR = Path(__file__).resolve().parents[2] / "results" / "prove_runs"

RUN_KEYS = (
    "run_id",
    "system",
    "scenario",
    "variant",
    "tier",
    "seed",
    "queryable",
    "correct",
    "oracle",
    "blocked_never_sent",
    "audit",
    "no_outcome",
    "latency",
    "extra",
    "wall_s",
    "load",
    "error",
)
"""The fields of a run the report reads (prove/report/cells.py); the rest stays in .data/prove/runs/."""

RECORDED_VERSIONS = ("python", "django", "postgresql", "temporalio", "temporal_cli", "dbos", "anthropic")
"""The versions a shard's meta records beside its commit (prove.harness.cell_run.versions())."""


def compact(run: dict) -> dict:
    """One run as its shard line: RUN_KEYS, the outcome's status, and the commit it ran at."""
    line = {k: run.get(k) for k in RUN_KEYS}
    outcome = run.get("outcome")
    line["outcome"] = {"status": outcome.get("status")} if isinstance(outcome, dict) else None
    line["git"] = (run.get("versions") or {}).get("git")
    return line


def write_shard(
    runs: list[dict],
    *,
    sweep_id: str,
    command: str,
    seeds: range,
    wall_s: float,
    versions: dict,
    where: Path = SHARDS_DIR,
) -> Path:
    """Write the shard's lines and its meta file; returns the .jsonl path.

    A shard is never overwritten: when ``<sweep_id>.jsonl`` exists already (another checkout's
    sweep of the same id wrote to the same directory), this one is ``<sweep_id>-2.jsonl``, and so
    on. The S10 Temporal timer figure is derived from a run's records before they are dropped.
    """
    from prove.report.cells import derive_s10_temporal

    derive_s10_temporal(runs)
    where.mkdir(parents=True, exist_ok=True)
    ordered = sorted(runs, key=lambda r: (r["scenario"], r["variant"], r["tier"], r["system"], r["seed"]))
    text = "".join(json.dumps(compact(r), sort_keys=True, default=str) + "\n" for r in ordered)
    name, k = sweep_id, 1
    while True:
        try:
            with open(where / f"{name}.jsonl", "x", encoding="utf-8") as f:  # "x": fails if it exists
                f.write(text)
            break
        except FileExistsError:
            k += 1
            name = f"{sweep_id}-{k}"
    path = where / f"{name}.jsonl"
    (where / f"{name}.meta.json").write_text(
        json.dumps(
            {
                "command": command,
                "wall_s": wall_s,
                "first_seed": seeds.start,
                "last_seed": seeds.stop - 1,
                "runs": len(runs),
                "git": versions.get("git"),
                "dirty_tree": versions.get("dirty_tree"),
                "versions": {k: versions.get(k) for k in RECORDED_VERSIONS},
                "written": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            },
            indent=1,
        )
        + "\n"
    )
    return path


def load_shards(where: Path = SHARDS_DIR) -> tuple[list[dict], list[dict]]:
    """(runs, metas) of every shard in ``where``, oldest shard first; a later shard's run of the
    same (cell, seed) replaces an earlier one. Each meta gets ``counted``: how many of its runs no
    later shard replaced.

    Raises:
        ValueError: no shard there.
    """
    metas = []
    latest: dict = {}
    origin: dict = {}  # (cell, seed) -> the shard whose run counts
    for meta_path in sorted(where.glob("*.meta.json"), key=lambda p: json.loads(p.read_text())["written"]):
        meta = json.loads(meta_path.read_text())
        meta["shard"] = meta_path.name.removesuffix(".meta.json")
        metas.append(meta)
        for line in (where / f"{meta['shard']}.jsonl").read_text().splitlines():
            run = json.loads(line)
            key = (run["scenario"], run["variant"], run["tier"], run["system"], run["seed"])
            latest[key], origin[key] = run, meta["shard"]
    if not metas:
        raise ValueError(f"--from-shards: no shard in {where}")
    for meta in metas:
        meta["counted"] = sum(1 for shard in origin.values() if shard == meta["shard"])
    return list(latest.values()), metas


def _counted(metas: list[dict]) -> list[dict]:
    """The shards with a run still counted (``counted`` from load_shards; a meta without it counts
    its ``runs``)."""
    return [m for m in metas if m.get("counted", m.get("runs", 0))]


def provenance(metas: list[dict]) -> dict:
    """The code the counted runs ran: {"git": the commits, oldest shard first, joined by ", ", a
    commit marked "(with uncommitted changes)" where a shard ran on such a tree, "dirty_tree": True
    when any did}. A shard whose runs later shards all replaced (``counted`` 0, see load_shards)
    describes no run of the report and is left out."""
    live = _counted(metas)
    names = (
        f"{m.get('git') or 'unknown'}" + (" (with uncommitted changes)" if m.get("dirty_tree") else "") for m in live
    )
    return {"git": ", ".join(dict.fromkeys(names)), "dirty_tree": any(m.get("dirty_tree") for m in live)}


def version_check(metas: list[dict], machine: dict) -> dict:
    """How the versions the counted shards recorded compare with ``machine``'s (the versions of
    the checkout and cluster that rebuilt the report, as prove.harness.cell_run.versions() reads them).

    Returns:
        {"counted": shards with a run still counted, "recorded": how many of those record their
        versions (shards written before the record existed do not), "differ": one
        "key value (shards a, b)" string per recorded value that is not ``machine``'s, sorted}.
    """
    live = _counted(metas)
    recorded = [m for m in live if m.get("versions")]
    differ: dict[tuple[str, str], list[str]] = {}
    for meta in recorded:
        for key in RECORDED_VERSIONS:
            value = meta["versions"].get(key)
            if value != machine.get(key):
                differ.setdefault((key, str(value)), []).append(meta["shard"])
    return {
        "counted": len(live),
        "recorded": len(recorded),
        "differ": [f"{key} {value} (shards {', '.join(names)})" for (key, value), names in sorted(differ.items())],
    }


def elapsed(metas: list[dict]) -> float:
    """Seconds of wall-clock time the shards covered: the union of each shard's interval
    [written - wall_s, written], so shards that ran at the same time count once.

    Args:
        metas: shard metas as load_shards returns them ("written" as "%Y-%m-%d %H:%M:%S UTC",
            "wall_s" in seconds).
    """
    spans = sorted(
        (end - m["wall_s"], end)
        for m in metas
        for end in [calendar.timegm(time.strptime(m["written"], "%Y-%m-%d %H:%M:%S UTC"))]
    )
    total, reach = 0.0, float("-inf")
    for start, end in spans:
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return round(total, 1)
