"""``manage.py bench --telemetry`` end to end at a tiny N (issue 46): runs with telemetry off and
on, on real workers and the real database, and a report whose figures agree with each other.

This checks that the benchmark runs, that its "on" runs really ran the SDK in the workers (the
spans they held) and its "off" runs did not, and that its figures add up; not how fast anything
is: that is the committed results/telemetry_bench.md, never a timed test.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT


def test_bench_telemetry_tiny_run_reports_on_and_off_rounds(tmp_path):
    out = tmp_path / "results"
    argv = ["bench", "--telemetry", "--n", "40", "--rounds", "2", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *argv], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "telemetry_bench.json").read_text())
    assert report["command"] == (
        f"python manage.py bench --telemetry --n 40 --workers 2 --concurrency 8 --rounds 2 --out {out}"
    )
    assert report["machine"]["interlock_commit"]
    first, second = report["rounds"]
    assert first["order"] == ["off", "on"] and second["order"] == ["on", "off"]  # interleaved
    for r in (first, second):
        assert r["off"]["spans"] is None and r["on"]["spans"] >= 40 * 6, r  # six spans per workflow, at least
        for mode in ("off", "on"):
            assert r[mode]["n"] == 40 and r[mode]["failed"] == 0 and r[mode]["workflows_per_s"] > 0, r[mode]
        assert r["ratio"] == round(r["on"]["workflows_per_s"] / r["off"]["workflows_per_s"], 3)
    s = report["summary"]
    assert s["ratio_by_round"] == [first["ratio"], second["ratio"]] and s["target_ratio"] == 0.9
    assert s["meets_target"] == (s["ratio"] >= 0.9)
    md = (out / "telemetry_bench.md").read_text()
    assert report["command"] in md and f"| on/off (medians) | {s['ratio']} |" in md
