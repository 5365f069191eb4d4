"""DBOS Transact in ``manage.py bench`` (docs/protocol.md §16.7): the 4-step and refund shapes on
the same PostgreSQL cluster as the runtime, in a system database of DBOS's own.

DBOS is a library: the process that starts a workflow runs it. So each DBOS process runs its
share of the N workflows on C threads (DBOS's "start workflows locally" workload), and the run is
repeated with 1, 2 and 4 processes to show the figure is DBOS's, not the harness's. Every figure
is measured the way the runtime's is: workflows/s over the wall time from the go signal to the
last result, commits per workflow from pg_stat_database, end-to-end latency on the database
clock (workflow_status.updated_at - created_at), CPU from /proc.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from ilr import _db as db
from prove.bench.core import ROOT, _pct
from prove.bench.proc_stats import machine_cpu, postgres_cpu_seconds

DBOS_DB = "ilr_bench_dbos"
FLOWS = "prove.bench.dbos_flows"


def dbos_version() -> str:
    """The installed DBOS Transact version."""
    from importlib.metadata import version

    return version("dbos")


def system_database_url(name: str = DBOS_DB) -> str:
    """A SQLAlchemy URL for database ``name`` of the configured cluster (a socket directory
    host goes in the query string, where libpq reads it)."""
    p = conninfo_to_dict(db.conninfo())
    user = urllib.parse.quote(p.get("user") or "postgres")
    password = f":{urllib.parse.quote(p['password'])}" if p.get("password") else ""
    host, port = p.get("host") or "localhost", p.get("port") or "5432"
    if host.startswith("/"):
        return f"postgresql+psycopg://{user}{password}@/{name}?host={urllib.parse.quote(host)}&port={port}"
    return f"postgresql+psycopg://{user}{password}@{host}:{port}/{name}"


def _fresh(root: Path = ROOT) -> str:
    with db.connect(db.conninfo()) as conn:
        conn.execute(f'drop database if exists "{DBOS_DB}" with (force)')
        conn.execute(f'create database "{DBOS_DB}"')
    url = system_database_url()
    # DBOS creates its tables at launch; one launch first, so P processes don't race on them.
    subprocess.run(
        [sys.executable, "-m", FLOWS, "migrate", "--url", url], cwd=root, check=True, stdout=subprocess.DEVNULL
    )
    return url


def run_dbos(shape: str, n: int, processes: int, concurrency: int, case: dict | None = None, root: Path = ROOT) -> dict:
    """N workflows of ``shape`` ("steps4" or "refund") over ``processes`` DBOS processes of
    ``concurrency`` threads each, on a fresh system database; returns the figures (the keys of
    the runtime's: workflows_per_s, e2e_p50_ms and e2e_p99_ms on the database clock,
    commits_per_workflow, CPU, RSS, busy cores, workflows_per_s_per_busy_core; e2e_ms samples).

    ``case``: the refund shape's {"target_url", "model_url"}.
    """
    url = _fresh(root)
    go = root / ".data" / "bench" / f"dbos-go-{time.time_ns()}"
    go.parent.mkdir(parents=True, exist_ok=True)
    shares = [n // processes + (1 if k < n % processes else 0) for k in range(processes)]
    firsts = [sum(shares[:k]) for k in range(processes)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                FLOWS,
                "run",
                "--url",
                url,
                "--shape",
                shape,
                "--first",
                str(firsts[k]),
                "--n",
                str(shares[k]),
                "--concurrency",
                str(concurrency),
                "--executor-id",
                f"bench-{k}",
                "--go",
                str(go),
                "--case",
                json.dumps(case or {}),
            ],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for k in range(processes)
    ]
    try:
        for p in procs:
            line = p.stdout.readline()
            if '"ready"' not in line:
                raise RuntimeError(f"DBOS process {p.pid} did not start: {line!r}")
        with db.connect(
            db.conninfo().replace(f"dbname={conninfo_to_dict(db.conninfo())['dbname']}", f"dbname={DBOS_DB}")
        ) as conn:
            before = conn.execute("select xact_commit from pg_stat_database where datname = %s", (DBOS_DB,)).fetchone()[
                "xact_commit"
            ]
            pg0, machine0 = postgres_cpu_seconds(), machine_cpu()
            go.touch()
            outs = [json.loads(p.stdout.readline()) for p in procs]
            pg_cpu = postgres_cpu_seconds() - pg0
            machine1 = machine_cpu()
            for p in procs:
                p.wait(60)
            time.sleep(1.5)  # pg_stat_database is flushed by the backends at most every second
            conn.execute("select pg_stat_clear_snapshot()")
            after = conn.execute("select xact_commit from pg_stat_database where datname = %s", (DBOS_DB,)).fetchone()[
                "xact_commit"
            ]
            rows = conn.execute(
                "select status, (updated_at - created_at)::float8 as ms from dbos.workflow_status"
            ).fetchall()
    finally:
        go.unlink(missing_ok=True)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    server_ms = [r["ms"] for r in rows]
    client_s = [x for o in outs for x in o["latencies_s"]]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    busy = (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * os.cpu_count()
    return {
        "system": "dbos",
        "shape": shape,
        "n": n,
        "processes": processes,
        "concurrency": concurrency,
        "statuses": statuses,
        "failed": n - statuses.get("SUCCESS", 0),
        "wall_s": round(wall, 3),
        "workflows_per_s": round(n / wall, 1),
        "e2e_p50_ms": round(statistics.median(server_ms), 1),
        "e2e_p99_ms": round(_pct(server_ms, 0.99), 1),
        "client_p50_ms": round(statistics.median(client_s) * 1000, 1),
        "commits_per_workflow": round((after - before) / n, 2),
        "postgres_cpu_s_per_workflow": round(pg_cpu / n, 5),
        "worker_cpu_s_per_workflow": round(sum(o["cpu_s"] for o in outs) / n, 5),
        "worker_peak_rss_mb": round(max(o["rss_mb"] for o in outs), 1),
        "machine_busy_cores": round(busy, 2),
        "workflows_per_s_per_busy_core": round(n / wall / busy, 1) if busy else None,
        "e2e_ms": [round(x, 2) for x in server_ms],
    }


def run_serial_dbos(n: int = 200, root: Path = ROOT) -> dict:
    """4-step workflows one at a time (one process, one thread): DBOS's latency floor, on the
    database clock as the runtime's serial figure is."""
    r = run_dbos("steps4", n, 1, 1, root=root)
    return {
        "n": n,
        "serial_p50_ms": r["e2e_p50_ms"],
        "client_p50_ms": r["client_p50_ms"],
        "note": "one DBOS process, one thread, each workflow called in-process; server-side = "
        "workflow_status.updated_at - created_at (database clock)",
    }
