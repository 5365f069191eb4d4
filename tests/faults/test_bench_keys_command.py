"""``manage.py bench --keys`` end to end at a tiny N (issue 42): keyed and unkeyed runs on real
workers and the real database, and a report whose figures agree with each other.

This checks that the benchmark runs and that its figures add up, not how fast anything is: speed
is shown by the committed results/keys_bench.md, never by a timed test.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT


def test_bench_keys_tiny_run_reports_every_figure(tmp_path):
    committed = ROOT / "results" / "keys_bench.json"
    before = committed.stat().st_mtime_ns if committed.exists() else None
    out = tmp_path / "results"
    argv = ["bench", "--keys", "6", "--n", "60", "--rounds", "1", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *argv], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "keys_bench.json").read_text())
    assert report["command"] == (
        f"python manage.py bench --keys 6 --n 60 --workers 2 --concurrency 8 --rounds 1 --out {out}"
    )
    assert report["machine"]["interlock_commit"] and len(report["loadavg_before_run"]) == 3
    (r,) = report["rounds"]
    for mode in ("keyed", "unkeyed"):
        assert r[mode]["n"] == 60 and r[mode]["failed"] == 0 and r[mode]["workflows_per_s"] > 0, r[mode]
        assert r[mode]["other_busy_cores"] <= r[mode]["machine_busy_cores"] + 0.05, r[mode]  # a part of the whole
        assert r[mode]["worker_waits"]["samples"] > 0 and r[mode]["worker_waits"]["busy_backends"] > 0, r[mode]
    assert r["ratio"] == round(r["keyed"]["workflows_per_s"] / r["unkeyed"]["workflows_per_s"], 3)
    k = r["keyed"]["keys"]
    # Every workflow had a slot row, ten per key: the first of each key took its slot at once, the
    # other nine were admitted from the queue by their predecessor's release; none is left live.
    assert (k["rows"], k["keys"], k["admitted"], k["live"]) == (60, 6, 54, 0), k
    assert k["max_holders"] == 1 and k["slot_limit"] == 1 and k["keys_over_limit"] == [] and k["max_running"] == 1
    lat = k["latency"]
    assert lat["n"] == 54 and lat["unclaimed"] == 0, lat
    assert 0 <= lat["release_to_admit_p50_ms"] <= lat["p50_ms"] <= lat["p90_ms"] <= lat["p99_ms"] <= lat["max_ms"]
    assert lat["max_ms"] < r["keyed"]["wall_s"] * 1000 and lat["claims_between_p50"] >= 0
    assert set(k["invariants"].values()) == {"held"} and len(k["invariants"]) == 5
    s = report["summary"]
    assert s["ratio"] == r["ratio"] and s["max_holders_by_round"] == [1] and s["failed"] == 0
    assert s["latency_p50_ms_median"] == lat["p50_ms"] and s["targets"]["max_holders"]["met"]
    assert s["targets"]["throughput_ratio"]["met"] is None  # judged at 5000 workflows over 50 keys only
    md = (out / "keys_bench.md").read_text()
    assert report["command"] in md and "## Targets" in md and "| 1 | keyed |" in md and "5 of 5 held" in md
    after = committed.stat().st_mtime_ns if committed.exists() else None
    assert after == before, "a scratch run rewrote the committed results"
