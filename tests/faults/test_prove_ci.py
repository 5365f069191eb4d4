"""The Prove harness's bounded CI subset (issue 8): S01 and S03 at tiers 1 and 2, S09 (tier 3
only) pre and post, for all four systems, n = 1, through prove.harness.runner (the code behind
``manage.py prove``) with real worker subprocesses, a real Temporal dev server, real SIGKILLs.

It fails when the runtime is not correct on a run, or when the report (md, json, plots) cannot
be produced. Temporal's outcomes are findings, not failures; a harness error on a Temporal run
still fails the test, because then the comparison was not made. Every subprocess must be gone at
the end.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest


def _children(pid: int) -> list[tuple[int, str]]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[1].split()
        state, ppid = rest[0], int(rest[1])
        if ppid == pid and state != "Z":
            out.append((int(entry.name), stat.split("(", 1)[1].split(")", 1)[0]))
    return out


def test_prove_ci_subset(test_dsn, tmp_path, monkeypatch):
    from django.conf import settings

    from prove.harness import cell_run, failures, runner
    from prove.report import runtime_prove as report

    # Worker subprocesses reach the same (test) database as this process.
    monkeypatch.setenv("ILR_DB_NAME", settings.DATABASES["default"]["NAME"])
    before = set(_children(os.getpid()))
    cells = runner.select(["S01", "S03"], [1, 2], None) + runner.select(["S09"], [3], None)
    assert len(cells) == 24
    result = runner.sweep(cells, 1)
    runs = result["runs"]
    failures.copy_failures(runs, tmp_path / "runtime_prove_failures")
    doc = report.build(
        runs,
        command="pytest tests/faults/test_prove_ci.py (S01,S03 t1,t2; S09 t3; n=1)",
        seeds=1,
        wall_s=result["wall_s"],
        versions=cell_run.versions(),
        selection={"ci": True},
        out_md=tmp_path / "runtime_prove.md",
        out_json=tmp_path / "runtime_prove.json",
    )

    errors = {r["run_id"]: r["error"] for r in runs if r.get("error")}
    assert not errors, f"harness errors: {json.dumps(errors, indent=1)}"
    bad = {
        r["run_id"]: {"outcome": r["outcome"], "oracle": r["oracle"]}
        for r in runs
        if r["system"] == "runtime" and not r["correct"]
    }
    assert not bad, f"the runtime was not correct: {json.dumps(bad, indent=1, default=str)}"

    md = (tmp_path / "runtime_prove.md").read_text()
    assert "## Main table" in md and "## TLC cross-reference" in md and "## Concessions" in md
    assert "Temporal's recommended key" in md and "stable across retry and reset" in md
    assert "the workflow id: stable across recovery" in md and "| (c) dbos |" in md
    assert json.loads((tmp_path / "runtime_prove.json").read_text())["rows"]
    assert len(doc["rows"]) == 6
    assert not doc.get("plots_error"), doc.get("plots_error")
    assert (tmp_path / "runtime_prove_correct.png").stat().st_size > 1000
    assert (tmp_path / "runtime_prove_latency.png").stat().st_size > 1000

    # Spot-check the oracle against the one sure prediction per row for the runtime.
    by = {(r["scenario"], r["variant"], r["tier"], r["system"]): r for r in runs}
    assert by[("S01", "", 1, "runtime")]["oracle"]["our_applications"] == 1
    assert by[("S03", "", 2, "runtime")]["oracle"]["total_refunded"] == 0
    assert by[("S09", "post", 3, "runtime")]["outcome"]["status"] == "AMBIGUOUS"

    # Where each run's time went: every run of this subset has a start, an approval and an
    # outcome, so its four phases are all positive and add up to its wall time.
    from prove.report import run_time

    for r in runs:
        split = run_time.phases(r)
        assert split and min(split.values()) > 0, (r["run_id"], split)
        assert sum(split.values()) == pytest.approx(r["wall_s"], abs=0.05), (r["run_id"], split)
    assert "| runtime | 6 |" in run_time.markdown(runs, "pytest")

    leftover = set(_children(os.getpid())) - before
    assert not leftover, f"subprocesses left running: {leftover}"


def test_shards_rebuild_the_report_from_every_shards_runs(test_dsn, tmp_path, monkeypatch):
    """Two shards of one cell (seeds 1 and 2) written one after the other; --from-shards counts
    both in the cell's n, and a shard line carries what the report reads, not the ledger."""
    from django.conf import settings

    from prove.harness import prove_command

    monkeypatch.setenv("ILR_DB_NAME", settings.DATABASES["default"]["NAME"])
    shards = tmp_path / "shards"
    for first in (1, 2):
        status = prove_command.run_command(
            quick=False,
            seeds=1,
            scenarios=["L0"],
            tiers=None,
            systems=["runtime"],
            results_dir=str(tmp_path / f"r{first}"),
            command=f"shard {first}",
            out=io.StringIO(),
            first_seed=first,
            shard=True,
            shards_dir=str(shards),
        )
        assert status == 0
    lines = [json.loads(line) for p in sorted(shards.glob("*.jsonl")) for line in p.read_text().splitlines()]
    assert sorted(r["seed"] for r in lines) == [1, 2]
    assert all("ledger" not in r and "records" not in r and r["correct"] is True for r in lines), lines
    out = tmp_path / "rebuilt"
    assert (
        prove_command.run_command(
            quick=False,
            seeds=None,
            scenarios=None,
            tiers=None,
            systems=None,
            results_dir=str(out),
            command="rebuild",
            out=io.StringIO(),
            from_shards=True,
            shards_dir=str(shards),
        )
        == 0
    )
    doc = json.loads((out / "runtime_prove.json").read_text())
    cell = doc["cells"]["L0||1|runtime"]
    assert cell["n"] == 2 and cell["correct"] == 2, cell
    assert doc["header"]["command"].startswith("shard 1 ; shard 2")
    # The report names each shard and says it is interim while a cell is below n = 30.
    assert doc["header"]["coverage"]["min_n"] == 2 and "L0 t1 runtime: 2" in doc["header"]["coverage"]["below_target"]
    shard_git = json.loads(next(shards.glob("*.meta.json")).read_text())["git"]
    assert doc["header"]["versions"]["git"] == shard_git
    md = (out / "runtime_prove.md").read_text()
    assert "this report is **interim**" in md and "| 1..1 | 1 |" in md and "| 2..2 | 1 |" in md, md
