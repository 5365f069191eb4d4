"""prove/harness/failures.py: failing runs kept one JSON-lines file per cell, at most 20 each, and
the older layout (a folder per cell, a file per run) compacted into it without losing a run."""

from __future__ import annotations

import json

from prove.harness import failures


def _rec(i: int, correct: bool = False, system: str = "dbos") -> dict:
    return {
        "run_id": f"S12-t2-{system}-s{i}-x",
        "scenario": "S12",
        "variant": "",
        "tier": 2,
        "system": system,
        "correct": correct,
        "seed": i,
    }


def test_failing_runs_are_kept_one_file_per_cell_at_most_20(tmp_path):
    runs_dir = tmp_path / "runs"
    (runs_dir / "S12-t2-dbos-s1-x").mkdir(parents=True)
    (runs_dir / "S12-t2-dbos-s1-x" / "attempts.jsonl").write_text('{"attempt": 1}\n{"attempt": 2}\n')
    runs = [_rec(i) for i in range(1, 26)] + [_rec(99, correct=True), _rec(1, system="temporal")]
    out = tmp_path / "failures"
    failures.copy_failures(runs, out, runs_dir)
    assert sorted(p.name for p in out.iterdir()) == ["S12-t2-dbos.jsonl", "S12-t2-temporal.jsonl"]
    lines = [json.loads(x) for x in (out / "S12-t2-dbos.jsonl").read_text().splitlines()]
    assert len(lines) == 20 and all(not rec["correct"] for rec in lines)
    assert lines[0]["attempts"] == [{"attempt": 1}, {"attempt": 2}]


def test_the_older_layout_compacts_into_one_file_per_cell(tmp_path):
    cell = tmp_path / "S12-t2-dbos"
    cell.mkdir()
    for i in (1, 2, 3):
        (cell / f"S12-t2-dbos-s{i}-x.json").write_text(json.dumps(_rec(i), indent=1))
    (cell / "S12-t2-dbos-s2-x.attempts.jsonl").write_text('{"attempt": 1}\n')
    assert failures.compact(tmp_path) == 3
    assert [p.name for p in tmp_path.iterdir()] == ["S12-t2-dbos.jsonl"]
    lines = [json.loads(x) for x in (tmp_path / "S12-t2-dbos.jsonl").read_text().splitlines()]
    assert [r["seed"] for r in lines] == [1, 2, 3]
    assert lines[1]["attempts"] == [{"attempt": 1}] and lines[0]["attempts"] == []
