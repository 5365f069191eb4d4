"""``manage.py bench_history`` end to end at small sizes (issue 43): a seeded history, the
seeding worker SIGKILLed holding the claim, a takeover that replays it in pages, and a report
whose figures agree with each other. Speed and memory are shown by the committed
results/history_bench.md, never by a timed test."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import ROOT


def test_bench_history_small_run_reports_every_figure(tmp_path):
    out = tmp_path / "results"
    argv = ["bench_history", "--steps", "1200", "--baseline", "300", "--pad", "10", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *argv], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "history_bench.json").read_text())
    assert report["command"] == (
        f"python manage.py bench_history --steps 1200 --baseline 300 --pad 10 --rounds 1 --out {out}"
    )
    for key, steps in (("baseline", 300), ("long", 1200)):
        (r,) = report["runs"][key]
        # The history, then the stamp step: a takeover of a running claim, replayed to the end.
        assert r["steps"] == steps and r["history_length"] == steps + 1, r
        assert r["takeover_prev_status"] == "running" and r["replay_s"] > 0, r
        # replay_s is kept to 0.1 ms, the per-step figure from the unrounded time.
        assert r["replay_us_per_step"] == pytest.approx(r["replay_s"] / steps * 1e6, abs=1e2 / steps + 0.05), r
        assert 0 < r["idle_rss_mb"] <= r["peak_rss_mb"], r
    s = report["summary"]
    assert s["per_step_ratio"] == round(s["long_us_per_step_median"] / s["baseline_us_per_step_median"], 2)
    assert "Replay of a long history after a takeover" in (out / "history_bench.md").read_text()
