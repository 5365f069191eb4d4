"""The measuring process of ``manage.py bench_tasks`` (``python -m prove.bench.tasks_harness``),
run by prove/bench/tasks_run.py with the bench's settings (prove/bench/tasks_settings.py) on the
bench database: the rounds, alternating between the backends, then the enqueue and claim costs.
Writes its raw figures as JSON to ``--json``.

Configurations, each on the same PostgreSQL and the same poll interval:
- "interlock": W ilr_worker processes of C run threads (W x C slots);
- "db_slots": W x C db_worker processes (as many slots as Interlock's; one task at a time each);
- "db_processes": W db_worker processes (as many processes as Interlock's), when W x C > W;
- "db_reconnect": W db_worker processes under the project's CONN_MAX_AGE 0 (Django's default),
  where db_worker opens a new connection on every loop: how it runs with this project's settings
  as they are. It is compared as the others are (Interlock against the best of them).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path


def configurations(workers: int, concurrency: int) -> list[dict]:
    configs = [
        {"name": "interlock", "backend": "interlock", "processes": workers, "concurrency": concurrency},
        {"name": "db_slots", "backend": "db", "processes": workers * concurrency, "concurrency": 1},
    ]
    if concurrency > 1:
        configs.append({"name": "db_processes", "backend": "db", "processes": workers, "concurrency": 1})
    configs.append({"name": "db_reconnect", "backend": "db", "processes": workers, "concurrency": 1, "max_age": 0})
    return configs


def spread(values: list[float]) -> dict:
    return {"median": round(statistics.median(values), 2), "min": min(values), "max": max(values)}


def summarize(config: dict, runs: list[dict]) -> dict:
    """A configuration's figures over its rounds: median, min and max of each."""
    tp = [r["throughput"] for r in runs]
    low = [r["latency_low_load"] for r in runs]
    return {
        **config,
        "tasks_per_s": spread([t["tasks_per_s"] for t in tp]),
        "batch_p50_ms": spread([t["latency"]["p50_ms"] for t in tp]),
        "batch_p95_ms": spread([t["latency"]["p95_ms"] for t in tp]),
        "batch_from_commit_p50_ms": spread([t["latency_from_commit"]["p50_ms"] for t in tp]),
        "low_load_p50_ms": spread([x["p50_ms"] for x in low]),
        "low_load_p95_ms": spread([x["p95_ms"] for x in low]),
        "enqueue_ms_per_task": spread([t["enqueue_ms_per_task"] for t in tp]),
        "commits_per_task": spread([t["commits_per_task"] for t in tp]),
        "machine_busy_cores": spread([t["machine_busy_cores"] for t in tp]),
        "postgres_cpu_ms_per_task": spread([t["postgres_cpu_ms_per_task"] for t in tp]),
        "worker_cpu_ms_per_task": spread([t["worker_cpu_ms_per_task"] for t in tp]),
    }


def run(args, say) -> dict:
    import psycopg

    from ilr import _db as db
    from prove.bench.tasks_backends import BACKENDS
    from prove.bench.tasks_explain import claim_plans, enqueue_cost, profile_areas
    from prove.bench.tasks_measure import measure
    from prove.bench.tasks_workers import Workers

    log_dir = Path(args.log_dir)
    configs = configurations(args.workers, args.concurrency)
    runs: dict[str, list[dict]] = {c["name"]: [] for c in configs}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with psycopg.connect(db.conninfo(), autocommit=True, application_name="bench_tasks") as mon:
        for k in range(args.rounds):
            order = configs if k % 2 == 0 else configs[::-1]  # alternate which backend goes first
            for c in order:
                say(f"round {k + 1} of {args.rounds}: {c['name']} ({c['processes']} x {c['concurrency']}) ...")
                env_c = {**env, "BENCH_TASKS_CONN_MAX_AGE": str(c["max_age"])} if "max_age" in c else env
                workers = Workers(c["backend"], c["processes"], c["concurrency"], args.poll, env_c, log_dir)
                r = measure(BACKENDS[c["backend"]], workers, args.n, args.latency_n, mon)
                r["round"] = k + 1
                runs[c["name"]].append(r)
                t = r["throughput"]
                say(
                    f"  {t['tasks_per_s']} tasks/s, batch p50 {t['latency']['p50_ms']} ms, "
                    f"low-load p50 {r['latency_low_load']['p50_ms']} ms"
                )
        profiles = {}
        for c in (configs[0], configs[-2]):  # Interlock, and django-tasks-db with the fewest processes
            say(f"profile: {c['name']} with py-spy on one worker (a batch not counted above) ...")
            raw = log_dir / f"profile-{c['name']}.txt"
            raw.unlink(missing_ok=True)
            workers = Workers(c["backend"], c["processes"], c["concurrency"], args.poll, env, log_dir)
            r = measure(BACKENDS[c["backend"]], workers, 2 * args.n, 1, mon, profile_to=raw)
            profiles[c["name"]] = {
                "tasks_per_s_while_profiled": r["throughput"]["tasks_per_s"],
                **(profile_areas(raw) if raw.exists() else {"samples": 0}),
            }
        say("enqueue cost and claim plans ...")
        enqueue = enqueue_cost()
        claims = claim_plans(args.n, args.concurrency)
    summary = {c["name"]: summarize(c, runs[c["name"]]) for c in configs}
    return {"configurations": summary, "runs": runs, "enqueue_cost": enqueue, "claims": claims, "profiles": profiles}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    for flag in ("--n", "--workers", "--concurrency", "--rounds", "--latency-n"):
        parser.add_argument(flag, type=int, required=True)
    parser.add_argument("--poll", type=float, required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--log-dir", required=True)
    args = parser.parse_args(argv)
    import django

    django.setup()
    started = time.monotonic()
    say = lambda s: (sys.stdout.write(s + "\n"), sys.stdout.flush())  # noqa: E731
    report = run(args, say)
    report["harness_wall_s"] = round(time.monotonic() - started, 1)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
