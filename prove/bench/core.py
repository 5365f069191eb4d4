"""Benchmark of the runtime core (docs/protocol.md §16.7).

``python manage.py bench --core [--n 1000] [--workers 2] [--concurrency 4]`` runs N
three-step workflows (no-op steps) on a fresh database of the configured PostgreSQL over W
``ilr_worker`` subprocesses and writes results/runtime_bench_core.{md,json}: workflows/s, the
median time per step and per workflow (end to end, database clock), and commits per workflow
from pg_stat_database deltas. One 2-core machine; figures are this machine's.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ilr import _db as db
from ilr import workflow
from prove.queries import (
    ANALYZE_WORKFLOWS,
    BENCH_COMPLETED_COUNT,
    BENCH_DEPLOY,
    BENCH_START_BATCH,
    CLAIM_RATE_BACKLOG,
    CLAIM_RATE_FINISH,
    EXPLAIN_COMPLETED_HISTORY,
    EXPLAIN_DEPLOY,
    EXPLAIN_DUE_WORKFLOW,
    EXPLAIN_SLEEPING_HISTORY,
    STEP_GAPS,
    WORKFLOW_DURATIONS,
)

ROOT = Path(__file__).resolve().parents[2]
BENCH_DB = "ilr_bench"


def noop(i: int) -> int:
    return i


@workflow(name="bench_steps3", version="1")
def bench_steps3(ctx, input):
    """Three no-op steps: the cost of the runtime itself."""
    return [ctx.step(f"s{i}", noop, i) for i in range(3)]


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def fresh_database(name: str) -> dict:
    """Drop and create database ``name`` in the configured cluster and migrate it.

    Returns:
        the environment for processes on it (ILR_DB_NAME set, kill points unset).
    """
    with db.connect(db.conninfo()) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')
        conn.execute(f'create database "{name}"')
    env = {**os.environ, "ILR_DB_NAME": name, "PYTHONUNBUFFERED": "1"}
    env.pop("ILR_KILL_AT", None)
    env.pop("ILR_STOP_AT", None)
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return env


def run_core(n: int = 1000, workers: int = 2, concurrency: int = 4, out=sys.stdout) -> dict:
    """Run the three-step benchmark; returns the figures (also written under results/)."""
    base = db.conninfo()
    env = fresh_database(BENCH_DB)
    dsn = base.replace(f"dbname={db.conninfo().split('dbname=')[1].split()[0]}", f"dbname={BENCH_DB}")
    procs = []
    log_dir = Path(ROOT / ".data" / "bench")
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        with db.connect(dsn) as conn:
            conn.execute(BENCH_DEPLOY, (bench_steps3.__ilr_workflow__.code_sha256,))
        for w in range(workers):
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        str(ROOT / "manage.py"),
                        "ilr_worker",
                        "--id",
                        f"b{w}",
                        "--import",
                        "prove.bench.core",
                        "--only",
                        "bench_steps3@1",
                        "--lease-ttl",
                        "30",
                        "--poll",
                        "0.05",
                        "--concurrency",
                        str(concurrency),
                    ],
                    cwd=ROOT,
                    env=env,
                    stdout=open(log_dir / f"b{w}.log", "wb"),
                    stderr=subprocess.STDOUT,
                )
            )
        time.sleep(3)  # workers up and idle
        with db.connect(dsn) as conn:
            before = conn.execute("select xact_commit from pg_stat_database where datname = %s", (BENCH_DB,)).fetchone()
            t0 = time.monotonic()
            conn.execute(BENCH_START_BATCH, (n,))
            while conn.execute(BENCH_COMPLETED_COUNT).fetchone()["c"] < n:
                if time.monotonic() - t0 > 600:
                    raise TimeoutError("bench did not finish in 600 s")
                time.sleep(0.05)
            wall = time.monotonic() - t0
            for p in procs:  # a backend flushes its statistics when its worker disconnects
                p.terminate()
            for p in procs:
                p.wait(30)
            time.sleep(1.5)
            conn.execute("select pg_stat_clear_snapshot()")
            after = conn.execute("select xact_commit from pg_stat_database where datname = %s", (BENCH_DB,)).fetchone()
            e2e = [r["s"] for r in conn.execute(WORKFLOW_DURATIONS).fetchall()]
            per_step = [r["s"] for r in conn.execute(STEP_GAPS).fetchall() if r["s"] is not None]
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(30)
    result = {
        "shape": "3 no-op steps",
        "n": n,
        "workers": workers,
        "concurrency": concurrency,
        "wall_s": round(wall, 3),
        "workflows_per_s": round(n / wall, 1),
        "workflow_e2e_p50_ms": round(statistics.median(e2e) * 1000, 2),
        "workflow_e2e_p99_ms": round(_pct(e2e, 0.99) * 1000, 2),
        "step_p50_ms": round(statistics.median(per_step) * 1000, 2),
        "commits_per_workflow": round((after["xact_commit"] - before["xact_commit"]) / n, 2),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "command": f"python manage.py bench --core --n {n} --workers {workers} --concurrency {concurrency}",
    }
    out.write(json.dumps(result, indent=2) + "\n")
    return result


def write_results(result: dict) -> None:
    results = ROOT / "results"
    results.mkdir(exist_ok=True)
    (results / "runtime_bench_core.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Runtime core benchmark",
        "",
        f"Command: `{result['command']}`",
        "",
        "One 2-core machine, embedded PostgreSQL 18 on a Unix socket; workers are `ilr_worker` "
        "subprocesses. Commits per workflow count every committed transaction in the bench database "
        "(claims, step records, finishes, and the workers' idle polling).",
        "",
        "| figure | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in result.items() if k != "command"],
    ]
    (results / "runtime_bench_core.md").write_text("\n".join(lines) + "\n")


# -- the commit bound: pgbench -N against the same PostgreSQL ---------------------------------------


def pgbench_tps(clients: int, seconds: int = 10) -> dict:
    """pgbench -N (no branch/teller updates: the simple-update commit path) at ``clients``
    connections against the same server, in its own database. Returns {"tps", "clients", "seconds"}."""
    import re

    from psycopg.conninfo import conninfo_to_dict

    from interlock_project.embedded_pg import pg_bin

    params = conninfo_to_dict(db.conninfo())
    with db.connect(db.conninfo()) as conn:
        conn.execute('drop database if exists "ilr_pgbench" with (force)')
        conn.execute('create database "ilr_pgbench"')
    args = []
    for key, flag in (("host", "-h"), ("port", "-p"), ("user", "-U")):
        if params.get(key):
            args += [flag, str(params[key])]
    subprocess.run(
        [pg_bin("pgbench"), *args, "-i", "-s", "1", "-q", "ilr_pgbench"], check=True, capture_output=True, text=True
    )
    out = subprocess.run(
        [pg_bin("pgbench"), *args, "-N", "-c", str(clients), "-j", "2", "-T", str(seconds), "ilr_pgbench"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    tps = round(float(re.search(r"tps = ([0-9.]+)", out).group(1)), 1)
    with db.connect(db.conninfo()) as conn:
        conn.execute('drop database if exists "ilr_pgbench" with (force)')
    return {"tps": tps, "clients": clients, "seconds": seconds, "command": f"pgbench -N -c {clients} -j 2 -T {seconds}"}


# -- scale: claim cost with a large history -----------------------------------------------------------


def claim_explain_with_history(finished: int = 100_000, sleeping: int = 10_000, backlog: int = 20_000) -> dict:
    """Fill a fresh database with ``finished`` completed and ``sleeping`` sleeping workflows, then
    time the claim statement (nothing due), measure claim throughput (workflows claimed per
    second, in batches of params["n"], each batch then finished) against the same measure on
    the empty table and with ``backlog`` workflows due at once, and capture the plan (EXPLAIN
    ANALYZE inside a rolled-back transaction, since the claim updates what it selects).

    Every claim, the timed one with nothing due included, is the worker's own claim transaction
    (ilr._worker.worker.claim_due: the claim and the step rows of what it took, prepared, in one round
    trip); results from before that change timed the claim statement alone, unprepared."""
    from ilr._queries.claims import CLAIM_SQL
    from ilr._worker.claims import claim_due

    base = db.conninfo()
    name = base.split("dbname=")[1].split()[0]
    with db.connect(base) as conn:
        conn.execute('drop database if exists "ilr_scale" with (force)')
        conn.execute('create database "ilr_scale"')
    env = {**os.environ, "ILR_DB_NAME": "ilr_scale"}
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    dsn = base.replace(f"dbname={name}", "dbname=ilr_scale")
    params = {"names": ["bench_steps3"], "versions": ["1"], "n": 4, "owner": "scale", "ttl": 30}
    with db.connect(dsn) as conn:
        conn.execute(EXPLAIN_DEPLOY)
        rate_empty = _claim_rate(conn, params, "empty")
        conn.execute(EXPLAIN_COMPLETED_HISTORY, (finished,))
        conn.execute(EXPLAIN_SLEEPING_HISTORY, (sleeping,))
        conn.execute(ANALYZE_WORKFLOWS)
        timings = []
        for _ in range(200):
            t = time.perf_counter()
            claim_due(conn, params)
            timings.append((time.perf_counter() - t) * 1000)
        rate_history = _claim_rate(conn, params, "history")
        rate_backlog = _claim_rate(conn, params, "backlog", k=backlog)
        conn.execute(EXPLAIN_DUE_WORKFLOW)
        with conn.transaction(force_rollback=True):
            plan = [
                r["QUERY PLAN"]
                for r in conn.execute("explain (analyze, buffers, costs off) " + CLAIM_SQL, params).fetchall()
            ]
    with db.connect(base) as conn:
        conn.execute('drop database if exists "ilr_scale" with (force)')
    return {
        "finished": finished,
        "sleeping": sleeping,
        "claim_nothing_due_p50_ms": round(statistics.median(timings), 3),
        "claim_nothing_due_p99_ms": round(_pct(timings, 0.99), 3),
        "claims_per_s_empty_table": rate_empty,
        "claims_per_s_with_history": rate_history,
        "claim_batch": params["n"],
        "due_backlog": backlog,
        "claims_per_s_due_backlog": rate_backlog,
        "explain": plan,
    }


def _claim_rate(conn, params: dict, tag: str, k: int = 2000) -> float:
    """Claims per second: insert ``k`` due workflows, claim them in batches of params["n"] with
    the worker's claim transaction (claim_due) and finish each batch in one UPDATE, one
    connection, until none is left."""
    from ilr._worker.worker import claim_due

    conn.execute(CLAIM_RATE_BACKLOG, (f"due-{tag}-", k))
    conn.execute(ANALYZE_WORKFLOWS)
    claimed = 0
    t = time.perf_counter()
    while True:
        rows, _ = claim_due(conn, params)
        if not rows:
            break
        claimed += len(rows)
        conn.execute(CLAIM_RATE_FINISH, ([r["id"] for r in rows],))
    elapsed = time.perf_counter() - t
    assert claimed == k, (claimed, k)
    return round(k / elapsed, 1)
