"""``manage.py bench_tasks`` end to end at a tiny N (issue 41): both backends measured on their
own workers, every task found, right and run once, and a report with both sides' figures.

This checks that the benchmark runs and that its counts add up, not how fast anything is: speed
is shown by the committed results/tasks_bench/report.md, never by a timed test.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT


def test_bench_tasks_tiny_run_reports_both_backends(tmp_path):
    committed = ROOT / "results" / "tasks_bench" / "raw.json"
    before = committed.stat().st_mtime_ns if committed.exists() else None
    out = tmp_path / "tasks_bench"
    argv = ["bench_tasks", "--n", "20", "--workers", "1", "--concurrency", "2", "--rounds", "1", "--latency-n", "3"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *argv, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "raw.json").read_text())
    assert report["command"] == "python manage.py " + " ".join(argv) + f" --poll 0.05 --out {out}"
    configs = report["configurations"]
    assert {c["backend"] for c in configs.values()} == {"interlock", "db"}
    assert [(c["processes"], c["concurrency"]) for c in configs.values()] == [(1, 2), (2, 1), (1, 1), (1, 1)]
    for name, runs in report["runs"].items():
        (run,) = runs
        checks = run["checks"]
        assert checks["enqueued"] == 23 and checks["bad_examples"] == [], (name, checks)
        assert checks["found"] == checks["right_value"] == checks["ran_once"] == 23, (name, checks)
        tp = run["throughput"]
        assert tp["tasks_per_s"] > 0 and tp["drain_tasks_per_s"] >= tp["tasks_per_s"], (name, tp)
        assert 0 < tp["latency"]["p50_ms"] <= tp["latency"]["p95_ms"] <= tp["latency"]["max_ms"], (name, tp)
        assert tp["latency"]["max_ms"] <= tp["wall_s"] * 1000 + 1, (name, tp)  # none finished after the last
        low = run["latency_low_load"]
        assert len(low["samples_ms"]) == 3 and 0 < low["p50_ms"] <= low["p95_ms"], (name, low)
        assert tp["commits_per_task"] > 0 and tp["worker_cpu_ms_per_task"] > 0, (name, tp)
    assert report["comparison"]["throughput_ratio"] > 0
    assert report["claims"]["interlock"]["plan"] and report["claims"]["db"]["plan"]
    assert report["machine"]["django_tasks_db"] and report["machine"]["nproc"] >= 1
    md = (out / "report.md").read_text()
    assert report["command"] in md and "## The rounds" in md and "django-tasks-db" in md
    assert ("The target is met" in md) == report["comparison"]["target_met"]
    after = committed.stat().st_mtime_ns if committed.exists() else None
    assert after == before, "a scratch run rewrote the committed results"
