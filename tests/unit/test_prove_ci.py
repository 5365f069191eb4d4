"""The Prove harness's selection, shards and report (issue 8), without running a sweep: which
systems a scenario runs on, a bad selection refused, recorded runs scored by the current rule,
concurrent shards' wall time, sweep ids, and the provenance and versions a shard records. The
bounded CI sweep itself is in tests/faults/test_prove_ci.py.
"""

from __future__ import annotations

import io
import json

import pytest


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
