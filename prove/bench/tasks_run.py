"""``manage.py bench_tasks``, the outer process: a fresh bench database migrated with the bench's
settings (prove/bench/tasks_settings.py), the machine's facts, the measuring process
(prove/bench/tasks_harness.py) run on it, then the report (prove/bench/tasks_write.py).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from ilr import _db as db
from prove.bench.core import ROOT
from prove.bench.proc_stats import machine_cpu

BENCH_DB = "ilr_bench_tasks"
SETTINGS = "prove.bench.tasks_settings"


def bench_env() -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": SETTINGS, "ILR_DB_NAME": BENCH_DB, "PYTHONUNBUFFERED": "1"}
    for key in ("ILR_KILL_AT", "ILR_STOP_AT"):
        env.pop(key, None)
    return env


def fresh_database(env: dict) -> None:
    """Drop and create the bench database, then migrate it with the bench's settings (the ilr
    schema and django-tasks-db's table)."""
    with db.connect(db.conninfo()) as conn:
        conn.execute(f'drop database if exists "{BENCH_DB}" with (force)')
        conn.execute(f'create database "{BENCH_DB}"')
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], cwd=ROOT, env=env, check=True)


def drop_database() -> None:
    with db.connect(db.conninfo()) as conn:
        conn.execute(f'drop database if exists "{BENCH_DB}" with (force)')


def busy_cores(seconds: float = 3.0) -> float:
    """Cores busy on the whole machine over ``seconds``, from /proc/stat: what else is running."""
    b0, t0 = machine_cpu()
    time.sleep(seconds)
    b1, t1 = machine_cpu()
    return round((b1 - b0) / max(1, t1 - t0) * (os.cpu_count() or 1), 2)


def _proc_field(path: str, key: str) -> str:
    """The value of the first ``key: value`` line of a /proc file."""
    lines = Path(path).read_text().splitlines()
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith(key)), "?")


def machine_facts() -> dict:
    model = _proc_field("/proc/cpuinfo", "model name")
    mem = _proc_field("/proc/meminfo", "MemTotal")
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
    with db.connect(db.conninfo()) as conn:
        server = conn.execute("show server_version").fetchone()["server_version"]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return {
        "nproc": int(nproc) if nproc.isdigit() else os.cpu_count(),
        "cpu_model": model,
        "memory": mem,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "postgresql": server,
        "django": version("django"),
        "django_tasks": _installed("django-tasks"),  # the backport; Django 6 has the framework built in
        "django_tasks_db": version("django-tasks-db"),
        "psycopg": version("psycopg"),
        "interlock_commit": commit.stdout.strip() or None,
    }


def _installed(name: str) -> str | None:
    try:
        return version(name)
    except PackageNotFoundError:
        return None


def run(
    n: int, workers: int, concurrency: int, rounds: int, latency_n: int, poll: float, command: str, out, out_dir: Path
) -> dict:
    """The whole bench; returns the report (written to ``out_dir`` by the caller)."""
    say = lambda s: (out.write(s + "\n"), out.flush())  # noqa: E731
    started = time.monotonic()
    say("the machine before the run (3 s) ...")
    before = busy_cores()
    env = bench_env()
    fresh_database(env)
    log_dir = ROOT / ".data" / "bench" / "tasks"
    raw = log_dir / f"harness-{time.time_ns()}.json"
    log_dir.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "prove.bench.tasks_harness", "--json", str(raw), "--log-dir", str(log_dir)]
    for flag, value in (
        ("--n", n),
        ("--workers", workers),
        ("--concurrency", concurrency),
        ("--rounds", rounds),
        ("--latency-n", latency_n),
        ("--poll", poll),
    ):
        argv += [flag, str(value)]
    try:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            say(line.rstrip("\n"))
        if proc.wait() != 0:
            raise RuntimeError(f"the bench's measuring process exited with {proc.returncode}")
        report = json.loads(raw.read_text())
    finally:
        drop_database()
        raw.unlink(missing_ok=True)
    report.update(
        command=command,
        params={
            "n": n,
            "workers": workers,
            "concurrency": concurrency,
            "rounds": rounds,
            "latency_n": latency_n,
            "poll_s": poll,
        },
        machine=machine_facts(),
        busy_cores_before_run=before,
        wall_s=round(time.monotonic() - started, 1),
    )
    report["comparison"] = compare(report["configurations"])
    return report


def cpu_budget(il: dict, db_best: dict, machine_cores: int, target: float = 3.0) -> dict:
    """What the machine's CPU allows the throughput ratio to be, from the runs' own cost per task
    (worker processes + PostgreSQL, medians; the enqueuing process is the same for both and left out).

    Returns the CPU ms per task of each side, their ratio (the throughput ratio when both are
    bound by the machine's cores), each side's ceiling (cores / CPU per task), and the most CPU per
    task that would give ``target`` x django-tasks-db at its measured cost.
    """
    il_ms = il["worker_cpu_ms_per_task"]["median"] + il["postgres_cpu_ms_per_task"]["median"]
    db_ms = db_best["worker_cpu_ms_per_task"]["median"] + db_best["postgres_cpu_ms_per_task"]["median"]
    return {
        "interlock_cpu_ms_per_task": round(il_ms, 3),
        "interlock_postgres_cpu_ms_per_task": il["postgres_cpu_ms_per_task"]["median"],
        "db_cpu_ms_per_task": round(db_ms, 3),
        "cost_ratio": round(db_ms / il_ms, 2) if il_ms else None,
        "interlock_ceiling_tasks_per_s": round(machine_cores / il_ms * 1000, 1) if il_ms else None,
        "db_ceiling_tasks_per_s": round(machine_cores / db_ms * 1000, 1) if db_ms else None,
        "budget_cpu_ms_per_task_for_target": round(db_ms / target, 3),
        "target": target,
    }


def compare(configs: dict) -> dict:
    """Interlock against django-tasks-db's best configuration, on the rounds' medians."""
    il = configs["interlock"]
    dbs = {k: v for k, v in configs.items() if v["backend"] == "db"}
    best = max(dbs, key=lambda k: dbs[k]["tasks_per_s"]["median"])
    ratio = lambda a, b: round(a / b, 2) if b else None  # noqa: E731
    out = {
        "db_best": best,
        "throughput_ratio": ratio(il["tasks_per_s"]["median"], dbs[best]["tasks_per_s"]["median"]),
        "low_load_p50_ratio": ratio(il["low_load_p50_ms"]["median"], dbs[best]["low_load_p50_ms"]["median"]),
        "batch_p50_ratio": ratio(il["batch_p50_ms"]["median"], dbs[best]["batch_p50_ms"]["median"]),
        "by_db_configuration": {
            k: {
                "throughput_ratio": ratio(il["tasks_per_s"]["median"], v["tasks_per_s"]["median"]),
                "low_load_p50_ratio": ratio(il["low_load_p50_ms"]["median"], v["low_load_p50_ms"]["median"]),
            }
            for k, v in dbs.items()
        },
    }
    out["cpu"] = cpu_budget(il, dbs[best], machine_cores=os.cpu_count() or 1)
    # The target: at least 3x the throughput, at no worse latency (both latency figures).
    out["target_met"] = bool(
        out["throughput_ratio"]
        and out["throughput_ratio"] >= 3
        and all(
            il[key]["median"] <= v[key]["median"] for v in dbs.values() for key in ("low_load_p50_ms", "batch_p50_ms")
        )
    )
    return out
