"""``manage.py bench_history``: the replay of a long history after a takeover (issue 43,
docs/protocol.md §5.7).

For each size (the baseline, 1,000 steps, then the long one, 50,000): on a fresh bench
database, a seeding worker runs ``bench_history`` (prove/bench/history_flows.py), which records
N steps and then hangs in its next step; the seeder is SIGKILLed holding the claim, and a fresh
worker that was idle until then takes the workflow over when the lease lapses and replays the N
steps (the claim's first 500, then pages of 500) up to the stamp step. Measured: the replay
time, from the takeover claim's ``claimed_at`` (ilr.claims, the database clock) to the wall
clock the stamp step took at the end of the replay (same machine); the worker's peak RSS
(VmHWM, /proc) after the workflow completed, and its RSS while idle before the takeover.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import prove.bench.history_flows  # noqa: F401 - registers bench_history in this process
from ilr import Runtime
from ilr import _db as db
from prove.bench.core import ROOT
from prove.bench.full_measure import BENCH_DB, fresh_db
from prove.bench.proc_stats import peak_rss_mb
from prove.bench.tasks_run import busy_cores, machine_facts
from prove.queries import HISTORY_STEP_COUNT, HISTORY_TAKEOVER_CLAIM

LEASE_TTL = 2.0
TARGET_PEAK_RSS_MB = 150.0
NEAR_LINEAR = 1.5
"""The per-step replay time of the long history at most this many times the baseline's is
reported as near-linear (our reading of the issue's "near-linear")."""


def _worker(name: str, env: dict) -> subprocess.Popen:
    logs = ROOT / ".data" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        str(ROOT / "manage.py"),
        "ilr_worker",
        "--id",
        name,
        "--import",
        "prove.bench.history_flows",
        "--only",
        "bench_history@1",
        "--lease-ttl",
        str(LEASE_TTL),
        "--poll",
        "0.2",
        "--concurrency",
        "1",
    ]
    out = open(logs / f"{name}.log", "wb")
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status").read().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def replay_once(steps: int, pad: int, out=None) -> dict:
    """One size: seed, kill, take over, measure (module docstring). Returns its figures."""
    dsn = fresh_db()
    env = {**os.environ, "ILR_DB_NAME": BENCH_DB, "PYTHONUNBUFFERED": "1"}
    env.pop("ILR_KILL_AT", None)
    rt = Runtime(dsn)
    wf_id = f"history-{steps}"
    seeder = _worker(f"seed-{steps}", {**env, "ILR_BENCH_HANG": "1"})
    taker = None
    try:
        t0 = time.monotonic()
        rt.start("bench_history", wf_id, {"steps": steps, "pad": pad})
        with db.connect(dsn) as conn:
            while conn.execute(HISTORY_STEP_COUNT, (wf_id,)).fetchone()["n"] < steps:
                if seeder.poll() is not None:
                    raise RuntimeError(f"the seeding worker exited with {seeder.returncode}")
                time.sleep(0.5)
        seed_s = time.monotonic() - t0
        taker = _worker(f"take-{steps}", env)
        time.sleep(3)  # Django loaded, idle: its RSS before the takeover
        idle_rss = _rss_mb(taker.pid)
        seeder.send_signal(signal.SIGKILL)
        seeder.wait(10)
        result = rt.result(wf_id, timeout=600)
        peak = peak_rss_mb(taker.pid)
        with db.connect(dsn) as conn:
            claim = conn.execute(HISTORY_TAKEOVER_CLAIM, (wf_id, f"take-{steps}")).fetchone()
        replay_s = result["frontier_at"] - claim["claimed_at_epoch"]
        figures = {
            "steps": steps,
            "pad_bytes": pad,
            "history_length": result["length"],
            "seed_s": round(seed_s, 1),
            "replay_s": round(replay_s, 4),
            "replay_us_per_step": round(replay_s / steps * 1e6, 1),
            "idle_rss_mb": round(idle_rss, 1),
            "peak_rss_mb": round(peak, 1),
            "takeover_prev_status": claim["prev_status"],
        }
        if out is not None:
            out.write(f"{steps} steps: {figures}\n")
        return figures
    finally:
        for proc in (seeder, taker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        rt.close()


def run(steps: int, baseline: int, pad: int, rounds: int, command: str, out=None) -> dict:
    """The baseline and the long history, ``rounds`` times each; the medians judged."""
    busy = busy_cores()
    loadavg = os.getloadavg()
    runs = {"baseline": [], "long": []}
    t0 = time.monotonic()
    for _ in range(rounds):
        runs["baseline"].append(replay_once(baseline, pad, out))
        runs["long"].append(replay_once(steps, pad, out))

    def median(key: str, field: str) -> float:
        values = sorted(r[field] for r in runs[key])
        return values[len(values) // 2]

    per_step_ratio = round(median("long", "replay_us_per_step") / median("baseline", "replay_us_per_step"), 2)
    peak = median("long", "peak_rss_mb")
    return {
        "command": command,
        "machine": machine_facts(),
        "busy_cores_before_run": busy,
        "loadavg_before_run": loadavg,
        "wall_s": round(time.monotonic() - t0, 1),
        "params": {"steps": steps, "baseline": baseline, "pad": pad, "rounds": rounds, "lease_ttl": LEASE_TTL},
        "runs": runs,
        "summary": {
            "long_replay_s_median": median("long", "replay_s"),
            "long_us_per_step_median": median("long", "replay_us_per_step"),
            "baseline_us_per_step_median": median("baseline", "replay_us_per_step"),
            "per_step_ratio": per_step_ratio,
            "long_peak_rss_mb_median": peak,
            "baseline_peak_rss_mb_median": median("baseline", "peak_rss_mb"),
            "targets": {
                "peak_rss_under_150_mb": peak < TARGET_PEAK_RSS_MB,
                "near_linear": per_step_ratio <= NEAR_LINEAR,
            },
        },
    }
