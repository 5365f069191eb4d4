"""Schedules under load: ``python manage.py bench_schedules [--schedules N] [--every S]
[--seconds T] [--workers W] [--poll P]``.

On a fresh database (``ilr_bench_schedules``), W ``ilr_worker`` subprocesses tick N schedules
of an ``every`` S seconds for T seconds. The workers register only a workflow nobody starts, so
the started tick workflows stay pending and what is measured is the scheduling alone. Reported:
ticks started and missed; exactly-once (tick rows with a workflow = workflow rows named
``sched:``, each schedule's ticks consecutive); the lateness of each tick's start (its workflow
row's ``created_at`` after its tick, on the database clock: p50, p99, max); and the database's
cost per started tick (commits of the bench database, and the cluster's CPU seconds from /proc,
both over the window). Figures are this machine's. ``--schedules 1 --every 1 --seconds 60 --out
schedules_race`` is the minute of two workers racing every tick of a 1 s schedule
(results/schedules_race.md).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from ilr import Runtime, workflow
from ilr import _db as db
from prove.bench.core import fresh_database
from prove.bench.proc_stats import cluster_cpu_seconds, postmaster_pid
from prove.queries import SCHED_BENCH_COMMITS, SCHED_BENCH_PAUSE_ALL, SCHED_BENCH_TICKS, SCHED_BENCH_WORKFLOWS

ROOT = Path(__file__).resolve().parents[2]
BENCH_DB = "ilr_bench_schedules"
RESULTS = ROOT / "results" / "schedules_bench"


@workflow(name="sched_bench", version="1")
def sched_bench(ctx, input):
    """The scheduled workflow (its ticks stay pending: no worker of the bench registers it)."""
    return None


@workflow(name="sched_bench_idle", version="1")
def sched_bench_idle(ctx, input):
    """What the bench workers register: never started."""
    return None


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def run(schedules: int = 1000, every: float = 10.0, seconds: float = 60.0, workers: int = 2, poll: float = 0.2,
        out=sys.stdout) -> dict:  # fmt: skip
    """Run the measurement once; returns the figures (also written to ``out`` as JSON)."""
    base = db.conninfo()
    env = fresh_database(BENCH_DB)
    dsn = base.replace(f"dbname={base.split('dbname=')[1].split()[0]}", f"dbname={BENCH_DB}")
    log_dir = ROOT / ".data" / "bench"
    log_dir.mkdir(parents=True, exist_ok=True)
    rt = Runtime(dsn)
    procs = []
    try:
        for i in range(schedules):
            rt.schedule(f"b{i}", "sched_bench", {}, every=every, overlap="allow_all", catchup_window=3600)
        for w in range(workers):
            cmd = [sys.executable, str(ROOT / "manage.py"), "ilr_worker", "--id", f"s{w}", "--import",
                   "prove.bench.schedules", "--only", "sched_bench_idle@1", "--poll", str(poll)]  # fmt: skip
            log = open(log_dir / f"schedules_s{w}.log", "wb")
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        time.sleep(3)  # the workers start and register; the window starts after
        conn = rt.connection()
        pm = postmaster_pid(conn)  # this cluster's CPU only: other clusters on the machine are left out
        first, cpu0, t0 = conn.execute(SCHED_BENCH_COMMITS).fetchone(), cluster_cpu_seconds(pm), time.monotonic()
        time.sleep(seconds)
        last, cpu1, t1 = conn.execute(SCHED_BENCH_COMMITS).fetchone(), cluster_cpu_seconds(pm), time.monotonic()
        conn.execute(SCHED_BENCH_PAUSE_ALL)
        rows = conn.execute(SCHED_BENCH_TICKS).fetchall()
        n_workflows = conn.execute(SCHED_BENCH_WORKFLOWS).fetchone()["n"]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
        rt.close()
    started = [r for r in rows if r["outcome"] == "started"]
    # The window's ticks: the lateness of the ticks due before the workers ran is their start-up's.
    window = [r for r in started if first["now"] <= r["scheduled_at"] < last["now"]]
    late = [r["late"] for r in window]
    by_schedule: dict[str, list] = {}
    for r in started:
        by_schedule.setdefault(r["schedule_id"], []).append(r["scheduled_at"])
    step = timedelta(seconds=every)
    gaps = sum(1 for ts in by_schedule.values() for a, b in zip(ts, ts[1:], strict=False) if b - a != step)
    result = {
        "schedules": schedules, "every_s": every, "window_s": round(t1 - t0, 1), "workers": workers, "poll_s": poll,
        "ticks_started": len(started), "ticks_missed": sum(r["outcome"] == "missed" for r in rows),
        "tick_workflows": n_workflows, "exactly_once": n_workflows == len(started) and gaps == 0,
        "gaps": gaps, "late_p50_s": round(_pct(late, 50), 3), "late_p99_s": round(_pct(late, 99), 3),
        "late_max_s": round(max(late, default=float("nan")), 3),
        "window_ticks": len(window),
        "commits_per_tick": round((last["xact_commit"] - first["xact_commit"]) / max(1, len(window)), 3),
        "pg_cpu_ms_per_tick": round(1000 * (cpu1 - cpu0) / max(1, len(window)), 3),
        "late_mean_s": round(statistics.fmean(late), 3) if late else None,
    }  # fmt: skip
    out.write(json.dumps(result) + "\n")
    return result


def write_results(result: dict, command: str, name: str = "schedules_bench") -> None:
    """Write results/<name>.json (the newest run) and results/<name>.md."""
    path = RESULTS.with_name(name)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.strip() or "unknown"  # fmt: skip
    row = {**result, "command": command, "commit": commit, "machine": f"{os.cpu_count()} cores"}
    path.with_suffix(".json").write_text(json.dumps(row, indent=2) + "\n")
    r = row
    lines = [
        "# Schedules under load",
        "",
        f"Made by `{command}` at {commit} on {r['machine']}: {r['schedules']} schedules every {r['every_s']:g} s,"
        f" {r['workers']} workers (poll {r['poll_s']:g} s), a {r['window_s']} s window. The started tick workflows"
        " stay pending (no worker registers them): the figures are the scheduling's alone. Every schedule ticks at"
        " the same instants (an interval is anchored at the Unix epoch): each tick is a burst of all of them.",
        "",
        "| ticks started (in the window) | missed | exactly once | lateness p50 (s) | p99 (s) | max (s) |"
        " commits per tick | PostgreSQL CPU per tick (ms) |",
        "|---|---|---|---|---|---|---|---|",
        f"| {r['ticks_started']} ({r['window_ticks']}) | {r['ticks_missed']} | {r['exactly_once']} |"
        f" {r['late_p50_s']} | {r['late_p99_s']} | {r['late_max_s']} | {r['commits_per_tick']} |"
        f" {r['pg_cpu_ms_per_tick']} |",
        "",
        "Lateness: a tick's workflow row's `created_at` after its scheduled time, on the database clock, for the"
        " ticks due inside the window (exactly once is over every tick). Commits:"
        " the bench database's `xact_commit` over the window (the workers' heartbeats and claim polls included),"
        " per started tick. CPU: the cluster's processes (its postmaster's children), from /proc, per started tick.",
    ]
    path.with_suffix(".md").write_text("\n".join(lines) + "\n")
