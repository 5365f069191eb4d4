"""The measurements of ``manage.py bench`` (prove/bench/full.py) under load, one function each: N
workflows on the runtime or on Temporal, with the commit bound's inputs (CPU, RSS:
prove/bench/proc_stats.py) and the py-spy profile (prove/bench/cpu_profile.py); on a fresh
database (``ilr_bench``, ``fresh_db``) of the configured cluster. The serial floors are in
prove/bench/floors.py."""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import prove.bench.full_flows  # noqa: F401 - registers the bench workflows so rt.start resolves them
from demo.peers.targets_client import http_json
from ilr import _db as db
from prove.bench.core import ROOT, _pct
from prove.bench.cpu_profile import start_profiler, stop_profiler
from prove.bench.proc_stats import (
    cluster_cpu_seconds,
    cpu_seconds,
    machine_cpu,
    peak_rss_mb,
    postgres_cpu_seconds,
    postmaster_pid,
)
from prove.queries import (
    FULL_EFFECT_OUTPUTS,
    FULL_EFFECT_STATUS_COUNTS,
    FULL_EFFECT_STEP_TIMES,
    FULL_ENDED_COUNT,
    FULL_NOT_COMPLETED,
    FULL_START_WORKFLOW,
    KEYS_START_WORKFLOW,
    STEP_GAPS,
    TAKEOVER_COUNT,
    WORKFLOW_DURATIONS,
)

LABEL = "one 2-core machine; Temporal is the dev server with SQLite, not a production cluster"
BENCH_DB = "ilr_bench"
TARGET_DELAY_S = 0.020


def bench_dsn() -> str:
    """The conninfo of the bench database (BENCH_DB) in the configured cluster."""
    base = db.conninfo()
    name = base.split("dbname=")[1].split()[0]
    return base.replace(f"dbname={name}", f"dbname={BENCH_DB}")


def fresh_db() -> str:
    """The bench database (BENCH_DB) dropped, created and migrated; its conninfo."""
    with db.connect(db.conninfo()) as conn:
        conn.execute(f'drop database if exists "{BENCH_DB}" with (force)')
        conn.execute(f'create database "{BENCH_DB}"')
    env = {**os.environ, "ILR_DB_NAME": BENCH_DB}
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return bench_dsn()


BENCH_LEASE_TTL = 3.0
"""Seconds. Short, so the heartbeat thread renews (every 1 s) during a run of a few seconds and
its worst gap under full load is measured; every fenced write renews the lease as well."""

HEARTBEAT_LINE = re.compile(r"heartbeat: (\d+) beats, worst gap ([0-9.]+) s \(schedule ([0-9.]+) s\)")


def run_runtime(
    shape: str,
    n: int,
    workers: int,
    concurrency: int,
    env_extra: dict,
    inputs,
    profile_to: Path | None = None,
    key_of=None,
) -> dict:
    """N workflows of ``shape`` ("bench_steps4" or "bench_refund") over W worker subprocesses.

    ``inputs(i, grant_id)`` builds workflow i's input; the refund shape's policy grant is issued
    on the fresh database first. With ``profile_to``, py-spy samples the first worker while the
    workflows run and writes its raw (collapsed) stacks there. With ``key_of``, workflow i starts
    with concurrency key ``key_of(i)`` and limit 1 (none where it returns None): the same insert
    for keyed and unkeyed runs (prove/bench/keys.py). The database stays until the next run.
    """
    dsn = fresh_db()
    grant = policy_grant(dsn) if shape == "bench_refund" else None
    env = {**os.environ, "ILR_DB_NAME": BENCH_DB, "PYTHONUNBUFFERED": "1", **env_extra}
    env.pop("ILR_KILL_AT", None)
    logs = ROOT / ".data" / "bench"
    logs.mkdir(parents=True, exist_ok=True)
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "ilr_worker",
                "--id",
                f"{shape}-{w}",
                "--import",
                "prove.bench.full_flows",
                "--only",
                f"{shape}@1",
                "--lease-ttl",
                str(BENCH_LEASE_TTL),
                "--poll",
                "1.0",
                "--concurrency",
                str(concurrency),
            ],
            cwd=ROOT,
            env=env,
            stdout=open(logs / f"{shape}-{w}.log", "wb"),
            stderr=subprocess.STDOUT,
        )
        for w in range(workers)
    ]
    try:
        _wait_until_running(procs, [logs / f"{shape}-{w}.log" for w in range(workers)])
        with db.connect(dsn) as conn:
            before = conn.execute("select xact_commit from pg_stat_database where datname = %s", (BENCH_DB,)).fetchone()
            cpu0 = postgres_cpu_seconds()
            worker_cpu0 = sum(cpu_seconds(p.pid) for p in procs)  # start-up (imports) is not the run's cost
            postmaster = postmaster_pid(conn)
            own0 = cluster_cpu_seconds(postmaster) + cpu_seconds(os.getpid())
            machine0 = machine_cpu()
            profiler = start_profiler(procs[0].pid, profile_to) if profile_to else None
            t0 = time.monotonic()
            with conn.cursor() as cur:
                if key_of is None:
                    cur.executemany(
                        FULL_START_WORKFLOW, [(f"{shape}-{i}", shape, json.dumps(inputs(i, grant))) for i in range(n)]
                    )
                else:
                    starts = [(f"{shape}-{i}", shape, json.dumps(inputs(i, grant)), key_of(i)) for i in range(n)]
                    cur.executemany(KEYS_START_WORKFLOW, [(*s, None if s[3] is None else 1) for s in starts])
            while conn.execute(FULL_ENDED_COUNT).fetchone()["c"] < n:
                if time.monotonic() - t0 > 900:
                    raise TimeoutError(f"{shape}: not finished in 900 s")
                time.sleep(0.05)
            wall = time.monotonic() - t0
            cpu = postgres_cpu_seconds() - cpu0
            machine1 = machine_cpu()
            # Everything else the machine ran meanwhile (other processes, other clusters): its busy
            # CPU less this cluster's, the workers' and this process's.
            own = cluster_cpu_seconds(postmaster) + cpu_seconds(os.getpid()) - own0
            own += sum(cpu_seconds(p.pid) for p in procs) - worker_cpu0
            other = (machine1[0] - machine0[0]) / os.sysconf("SC_CLK_TCK") - own
            if profiler is not None:
                stop_profiler(profiler)
            failures = _failures(conn, shape)
            effect_statuses = _effect_statuses(conn)
            # A claim of a workflow that was running is a takeover: its owner's lease had lapsed.
            takeovers = conn.execute(TAKEOVER_COUNT).fetchone()["c"]
            rss = max(peak_rss_mb(p.pid) for p in procs)
            worker_cpu = sum(cpu_seconds(p.pid) for p in procs) - worker_cpu0
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
            heartbeats = [
                HEARTBEAT_LINE.search((logs / f"{shape}-{w}.log").read_text(errors="replace")) for w in range(workers)
            ]
            time.sleep(1.5)
            conn.execute("select pg_stat_clear_snapshot()")
            after = conn.execute("select xact_commit from pg_stat_database where datname = %s", (BENCH_DB,)).fetchone()
            e2e = [r["s"] for r in conn.execute(WORKFLOW_DURATIONS).fetchall()]
            effect_ms = [r["ms"] for r in conn.execute(FULL_EFFECT_STEP_TIMES)]
            per_call = [r["s"] for r in conn.execute(STEP_GAPS).fetchall() if r["s"] is not None]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    busy = (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * os.cpu_count()
    return {
        "system": "runtime",
        "shape": shape,
        "n": n,
        "failed": len(failures),
        "failures": failures[:10],
        "effect_statuses": effect_statuses,
        "takeovers": takeovers,
        "wall_s": round(wall, 3),
        "workflows_per_s": round(n / wall, 1),
        "e2e_p50_ms": round(statistics.median(e2e) * 1000, 1),
        "e2e_p99_ms": round(_pct(e2e, 0.99) * 1000, 1),
        "durable_call_p50_ms": round(statistics.median(per_call) * 1000, 2) if per_call else None,
        "commits_per_workflow": round((after["xact_commit"] - before["xact_commit"]) / n, 2),
        "postgres_cpu_s_per_workflow": round(cpu / n, 5),
        "worker_peak_rss_mb": round(rss, 1),
        "worker_cpu_s_per_workflow": round(worker_cpu / n, 5),
        "machine_busy_cores": round(busy, 2),
        "other_busy_cores": round(other / wall, 2),
        "workflows_per_s_per_busy_core": round(n / wall / busy, 1) if busy else None,
        "heartbeats": sum(int(m[1]) for m in heartbeats if m),
        "worst_heartbeat_gap_s": max((float(m[2]) for m in heartbeats if m), default=None),
        "heartbeat_schedule_s": round(BENCH_LEASE_TTL / 3, 3),
        "e2e_ms": [round(x * 1000, 2) for x in e2e],
        "effect_ms": effect_ms,
    }


def _wait_until_running(procs, logs, timeout: float = 120.0) -> None:
    """Wait until every worker printed its start-up line (registered: its deployments exist), then
    3 s more, as the bench waited before it read the line: the workers' connections and first
    claim loops are up, so a run's wall time measures the work, not the start (and figures stay
    comparable with earlier results). A worker that exits first raises."""
    deadline = time.monotonic() + timeout
    for proc, log in zip(procs, logs):
        while ": running " not in log.read_text(errors="replace"):
            if proc.poll() is not None:
                raise RuntimeError(f"worker exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker not running after {timeout} s: {log}")
            time.sleep(0.05)
    time.sleep(3)


def _failures(conn, shape: str) -> list[dict]:
    """Every workflow of the run that did not complete, and for the refund shape every effect
    that did not land (a refused or ambiguous effect is not a refund), each with what it
    recorded: the workflow's status and error, or the effect's output. Kept in the report so a
    failure can be read after the run, whose database the next run drops.

    An effect that landed once by another way than the first send (COMMITTED_BY_RETRY after an
    unknown outcome, DUPLICATE_IGNORED after a takeover whose fenced-out sender late-committed)
    is a refund, not a failure: ``_effect_statuses`` counts those.
    """
    from ilr import EffectResult

    rows = [
        {"workflow_id": r["id"], "status": r["status"], "error": r["error"]} for r in conn.execute(FULL_NOT_COMPLETED)
    ]
    if shape == "bench_refund":
        rows += [
            {"workflow_id": r["workflow_id"], "effect_status": r["output"].get("status"), "output": r["output"]}
            for r in conn.execute(FULL_EFFECT_OUTPUTS)
            if not EffectResult(r["output"].get("status", ""), "").committed
        ]
    return rows


def _effect_statuses(conn) -> dict[str, int]:
    """{EffectResult status: count} over the run's recorded effect steps."""
    return {r["status"]: r["n"] for r in conn.execute(FULL_EFFECT_STATUS_COUNTS)}


def run_temporal(shape: str, n: int, workers: int, concurrency: int, inputs, server_address: str) -> dict:
    """The same shape on the Temporal dev server, worker subprocesses, same N and concurrency."""
    task_queue = f"bench-{shape}-{time.time_ns()}"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "prove.bench.temporal_flows",
                "worker",
                "--address",
                server_address,
                "--task-queue",
                task_queue,
                "--concurrency",
                str(concurrency),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        for _ in range(workers)
    ]

    async def drive():
        from temporalio.client import Client

        client = await Client.connect(server_address)
        sem = asyncio.Semaphore(64)
        e2e = []

        async def one(i):
            async with sem:
                t = time.perf_counter()
                wf = "Steps4" if shape == "steps4" else "RefundShape"
                args = [] if shape == "steps4" else [inputs(i)]
                await client.execute_workflow(wf, *args, id=f"{task_queue}-{i}", task_queue=task_queue)
                e2e.append(time.perf_counter() - t)

        await asyncio.sleep(3)
        machine0 = machine_cpu()
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
        machine1 = machine_cpu()
        return wall, e2e, (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * os.cpu_count()

    try:
        wall, e2e, busy = asyncio.run(drive())
        rss = max(peak_rss_mb(p.pid) for p in procs)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
    return {
        "system": "temporal",
        "shape": shape,
        "n": n,
        "wall_s": round(wall, 3),
        "workflows_per_s": round(n / wall, 1),
        "e2e_p50_ms": round(statistics.median(e2e) * 1000, 1),
        "e2e_p99_ms": round(_pct(e2e, 0.99) * 1000, 1),
        "worker_peak_rss_mb": round(rss, 1),
        "machine_busy_cores": round(busy, 2),
        "workflows_per_s_per_busy_core": round(n / wall / busy, 1) if busy else None,
        "e2e_ms": [round(x * 1000, 2) for x in e2e],
    }


def effect_overhead_ms(effect_ms: list[float], target_url: str) -> float | None:
    """p50 of the effect step's duration (from the decide row to the effect row) minus p50 of the
    target's own processing time (its access log), in ms: what a gated effect adds."""
    log = http_json("GET", f"{target_url}/access_log")[1]["entries"]
    target_ms = [
        (e["t_done_mono"] - e["t_mono"]) * 1000
        for e in log
        if e.get("path") == "/refunds" and e.get("method") == "POST" and e.get("t_done_mono")
    ]
    if not effect_ms or not target_ms:
        return None
    return round(statistics.median(effect_ms) - statistics.median(target_ms), 2)


def policy_grant(dsn: str) -> str:
    """A pre-issued policy grant for the refund shape (no approval wait)."""
    from ilr import grant_in

    with db.connect(dsn) as conn, conn.transaction():
        return grant_in(conn, "bench_refund", "refund", by="bench-policy", max_cents=1_000_000)
