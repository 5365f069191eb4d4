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


@pytest.mark.slow
def test_prove_ci_subset(test_dsn, tmp_path, monkeypatch):
    from django.conf import settings

    from prove.harness import runner
    from prove.report import runtime_prove as report

    # Worker subprocesses reach the same (test) database as this process.
    monkeypatch.setenv("ILR_DB_NAME", settings.DATABASES["default"]["NAME"])
    before = set(_children(os.getpid()))
    cells = runner.select(["S01", "S03"], [1, 2], None) + runner.select(["S09"], [3], None)
    assert len(cells) == 24
    result = runner.sweep(cells, 1)
    runs = result["runs"]
    runner.copy_failures(runs, tmp_path / "runtime_prove_failures")
    doc = report.build(
        runs,
        command="pytest tests/test_prove_ci.py (S01,S03 t1,t2; S09 t3; n=1)",
        seeds=1,
        wall_s=result["wall_s"],
        versions=runner.versions(),
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


@pytest.mark.slow
def test_shards_rebuild_the_report_from_every_shards_runs(test_dsn, tmp_path, monkeypatch):
    """Two shards of one cell (seeds 1 and 2) written one after the other; --from-shards counts
    both in the cell's n, and a shard line carries what the report reads, not the ledger."""
    from django.conf import settings

    from prove.harness import runner

    monkeypatch.setenv("ILR_DB_NAME", settings.DATABASES["default"]["NAME"])
    shards = tmp_path / "shards"
    for first in (1, 2):
        status = runner.run_command(
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
        runner.run_command(
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


def test_a_scenario_runs_only_on_the_systems_it_names():
    from prove.harness import runner

    assert [c[2] for c in runner.select(["S14"], None, None)] == ["runtime", "temporal", "temporal_check"]
    assert [c[2] for c in runner.select(["S01"], [1], None)] == ["runtime", "temporal", "temporal_check", "dbos"]


def test_prove_command_rejects_bad_selection():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="unknown scenario"):
        call_command("prove", "--scenario", "S99", stdout=io.StringIO())
    with pytest.raises(CommandError, match="unknown system"):
        call_command("prove", "--scenario", "S01", "--system", "nomad", stdout=io.StringIO())


def test_a_rebuilt_report_scores_recorded_runs_by_the_current_rule():
    """A committed S12 run recorded its P3 as a false claim under the old ground truth (a send
    the revoke listed as in flight, processed after the revoke returned); the report scores the
    recorded answers and oracle counts again by the current rule, so the receipt's
    authorized_when_fired: true is a correct answer there."""
    from prove.harness.shards import SHARDS_DIR
    from prove.report.cells import aggregate

    lines = (SHARDS_DIR / "1202043706.jsonl").read_text().splitlines()
    [run] = [json.loads(x) for x in lines if '"run_id": "S12-t1-runtime-s4-1202043706L1"' in x]
    assert run["audit"]["false_claims"] == 1 and run["audit"]["per"]["P3"] == "false"  # as recorded
    assert run["oracle"]["sends_after_revoke"] == 1 and run["oracle"]["sends_after_revoke_unlisted"] == 0
    [cell] = aggregate([run]).values()
    assert cell["false_claims"] == 0 and cell["can_prove_mean"] == 5


def test_shards_run_at_the_same_time_count_once_in_the_wall_time():
    """Shard 1202025152 (S10, 1807 s) ran inside shard 1202025120's interval (2302 s): together
    they covered 2302 s of wall-clock time, not the 4109 s their sum says."""
    from prove.harness import shards

    _, metas = shards.load_shards()
    pair = [m for m in metas if m["shard"] in ("1202025120", "1202025152")]
    assert sum(m["wall_s"] for m in pair) == pytest.approx(4109.3)
    assert shards.elapsed(pair) == pytest.approx(2302.1, abs=1)
    apart = [{**pair[0], "written": "2026-12-01 00:00:00 UTC"}, {**pair[1], "written": "2026-12-02 00:00:00 UTC"}]
    assert shards.elapsed(apart) == pytest.approx(4109.3)


def test_two_sweeps_started_in_the_same_second_get_ids_of_their_own(tmp_path, monkeypatch):
    """Two shards started in the same second (a lane shard and an S10 shard beside it) took the
    same time-based sweep id, and the later shard file overwrote the earlier one. Each new id is
    claimed (its sweep directory created) and a shard file is never overwritten."""
    from prove.harness import runner, shards

    monkeypatch.setattr(runner, "RUNS_DIR", tmp_path / "prove" / "runs")
    monkeypatch.setattr(runner.time, "strftime", lambda fmt, *a: "1202071642")
    first, second = runner.new_sweep_id(), runner.new_sweep_id()
    assert first == "1202071642" and second != first and second.startswith(first)
    assert (tmp_path / "prove" / f"sweep-{second}").is_dir()

    run = {"run_id": "L0-t1-runtime-s1-x", "system": "runtime", "scenario": "L0", "variant": "", "tier": 1, "seed": 1}
    paths = [
        shards.write_shard(
            [dict(run)],
            sweep_id="1202071642",
            command=c,
            seeds=range(1, 2),
            wall_s=1.0,
            versions={},
            where=tmp_path / "shards",
        )
        for c in ("the lanes", "the S10 shard")
    ]
    assert paths[0] != paths[1] and all(p.exists() for p in paths)
    _, metas = shards.load_shards(tmp_path / "shards")
    assert sorted(m["command"] for m in metas) == ["the S10 shard", "the lanes"]


def test_a_shard_whose_runs_were_all_run_again_leaves_the_reports_provenance(tmp_path):
    """Seeds 1-2 ran first on a tree with uncommitted changes; a later shard on a clean commit ran
    the same cells and seeds again, so none of the first shard's runs counts. The report's
    versions then name only the clean commit, and the shard table shows the first shard with 0
    runs counted."""
    from prove.harness import shards
    from prove.report.markdown import _shard_rows

    run = {"run_id": "x", "system": "runtime", "scenario": "L0", "variant": "", "tier": 1}
    for git, dirty in (("aaaaaaa", True), ("bbbbbbb", False)):
        shards.write_shard(
            [dict(run, seed=1), dict(run, seed=2)],
            sweep_id=f"12020000{git[0]}",
            command=f"at {git}",
            seeds=range(1, 3),
            wall_s=1.0,
            versions={"git": git, "dirty_tree": dirty},
            where=tmp_path,
        )
    # "written" has one-second resolution: order the two shards explicitly.
    first = tmp_path / "12020000a.meta.json"
    first.write_text(first.read_text().replace('"written": "', '"written": "0'))
    runs, metas = shards.load_shards(tmp_path)
    assert len(runs) == 2
    assert [(m["shard"], m["counted"]) for m in metas] == [("12020000a", 0), ("12020000b", 2)]
    assert shards.provenance(metas) == {"git": "bbbbbbb", "dirty_tree": False}
    assert shards.provenance([dict(m, counted=2) for m in metas]) == {
        "git": "aaaaaaa (with uncommitted changes), bbbbbbb",
        "dirty_tree": True,
    }
    rows = _shard_rows({"header": {"selection": {"shards": metas}}})
    assert [(r["runs"], r["counted"]) for r in rows] == [("2", "0"), ("2", "2")]


def test_a_shard_records_the_versions_its_runs_used_and_the_report_compares_them(tmp_path):
    """A shard's meta recorded only its commit, so a report rebuilt on another machine printed that
    machine's Python, PostgreSQL and SDK versions with nothing to check them against. The meta now
    records them, and version_check names every recorded value that is not the rebuilding
    machine's; a shard written before the record is counted as not recording."""
    from prove.harness import shards

    machine = {
        "python": "3.11.7",
        "django": "5.2.19",
        "postgresql": "18.4",
        "temporalio": "1.35.0",
        "temporal_cli": "temporal version 1.9.1",
        "dbos": "3.4.0",
        "anthropic": "2.15.0",
        "git": "ccccccc",
        "dirty_tree": False,
    }
    run = {"run_id": "x", "system": "runtime", "scenario": "L0", "variant": "", "tier": 1}
    for seed, postgresql in ((1, "18.4"), (2, "18.3"), (3, "18.4")):
        shards.write_shard(
            [dict(run, seed=seed)],
            sweep_id=f"1202000{seed}",
            command=f"seed {seed}",
            seeds=range(seed, seed + 1),
            wall_s=1.0,
            versions=dict(machine, postgresql=postgresql),
            where=tmp_path,
        )
    meta = json.loads((tmp_path / "12020001.meta.json").read_text())
    assert meta["versions"] == {k: machine[k] for k in shards.RECORDED_VERSIONS}
    assert "git" not in meta["versions"]
    # A shard from before the record: its meta has no "versions".
    old = tmp_path / "12020003.meta.json"
    old.write_text(json.dumps({k: v for k, v in json.loads(old.read_text()).items() if k != "versions"}))

    _, metas = shards.load_shards(tmp_path)
    assert shards.version_check(metas, machine) == {
        "counted": 3,
        "recorded": 2,
        "differ": ["postgresql 18.3 (shards 12020002)"],
    }
    assert shards.version_check(metas, dict(machine, postgresql="18.3"))["differ"] == [
        "postgresql 18.4 (shards 12020001)"
    ]
