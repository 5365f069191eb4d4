"""How long a database restart holds workflows up: ``python manage.py bench_restart [--waiting N]
[--inflight K] [--concurrency C] [--lease-ttl L] [--poll P]``.

On a fresh database (``ilr_bench_restart``) of the embedded PostgreSQL, one ``ilr_worker``
subprocess holds K workflows inside a step body (K < C, so the others find a slot) and N more
sleep on a signal. The server is
stopped (``pg_ctl stop -m fast``) and started; from the moment it accepts connections again the
N are signalled and the K step bodies return. Reported, per workflow, the time from the server
accepting connections to the workflow completing (max and median), and how many claims counted
a takeover or ended stuck (both should be 0). Figures are this machine's.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ilr import _db as db
from ilr import workflow
from prove.bench.core import fresh_database
from prove.harness.waiting import until
from prove.queries import (
    RESTART_DEPLOY,
    RESTART_ENDED,
    RESTART_OUTCOME_COUNTS,
    RESTART_RUNNING_AND_SLEEPING,
    RESTART_START_INFLIGHT,
    RESTART_START_WAITING,
)

ROOT = Path(__file__).resolve().parents[2]
BENCH_DB = "ilr_bench_restart"


def _wait_file(path: str) -> str:
    while not os.path.exists(path):
        time.sleep(0.05)
    return path


@workflow(name="restart_inflight", version="1")
def restart_inflight(ctx, input):
    """One step whose body returns once input["path"] exists (no database use meanwhile)."""
    return ctx.step("gate", _wait_file, input["path"])


@workflow(name="restart_waiting", version="1")
def restart_waiting(ctx, input):
    """Waits on signal "go"; returns its payload."""
    return ctx.wait_signal("go")


def run(
    waiting: int = 40,
    inflight: int = 4,
    concurrency: int = 8,
    lease_ttl: float = 5.0,
    poll: float = 1.0,
    out=sys.stdout,
) -> dict:
    """Run the measurement once; returns the figures (also written to ``out`` as JSON).

    Raises:
        RuntimeError: the configured database is not the embedded PostgreSQL.
    """
    from django.conf import settings

    from interlock_project.embedded_pg import EmbeddedPostgres

    pgdata = getattr(settings, "ILR_EMBEDDED_PGDATA", None)
    if not pgdata:
        raise RuntimeError("bench_restart restarts the server: it needs the embedded PostgreSQL (no DATABASE_URL)")
    cluster = EmbeddedPostgres(pgdata)
    base = db.conninfo()
    env = fresh_database(BENCH_DB)
    dsn = base.replace(f"dbname={base.split('dbname=')[1].split()[0]}", f"dbname={BENCH_DB}")
    log_dir = ROOT / ".data" / "bench"
    log_dir.mkdir(parents=True, exist_ok=True)
    gate_dir = Path(tempfile.mkdtemp(prefix="ilr-restart-"))
    gate = gate_dir / "gate"
    ids_in = [f"in{i}" for i in range(inflight)]
    ids_wait = [f"wait{i}" for i in range(waiting)]
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "ilr_worker",
            "--id",
            "r1",
            "--import",
            "prove.bench.restart",
            "--only",
            "restart_inflight@1,restart_waiting@1",
            "--lease-ttl",
            str(lease_ttl),
            "--poll",
            str(poll),
            "--concurrency",
            str(concurrency),
        ],
        cwd=ROOT,
        env=env,
        stdout=open(log_dir / "restart_r1.log", "wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        with db.connect(dsn) as conn:
            for d in (restart_inflight, restart_waiting):
                conn.execute(RESTART_DEPLOY, (d.__ilr_workflow__.name, d.__ilr_workflow__.code_sha256))
            for wf_id in ids_in:
                conn.execute(RESTART_START_INFLIGHT, (wf_id, json.dumps({"path": str(gate)})))
            conn.execute(RESTART_START_WAITING, (ids_wait,))
            status = RESTART_RUNNING_AND_SLEEPING
            until(
                lambda: (lambda r: r["running"] == inflight and r["sleeping"] == waiting)(
                    conn.execute(status).fetchone()
                ),
                60,
                "every workflow in place",
            )
        cluster.stop()  # pg_ctl stop -m fast: every session, the worker's included, is terminated
        cluster.start()  # returns once the server accepts connections
        up = time.monotonic()
        done: dict[str, float] = {}
        with db.connect(dsn) as conn:
            from ilr import signal_in

            with conn.transaction():
                for wf_id in ids_wait:
                    signal_in(conn, wf_id, "go", {"n": 1})
            gate.touch()
            left = set(ids_in + ids_wait)

            def progressed() -> bool:
                rows = conn.execute(RESTART_ENDED, (list(left),)).fetchall()
                now = time.monotonic() - up
                for r in rows:
                    done[r["id"]] = now
                    left.discard(r["id"])
                return not left

            until(progressed, 10 * lease_ttl + 60, "every workflow ending")
            summary = conn.execute(RESTART_OUTCOME_COUNTS).fetchone()
    finally:
        gate.touch()  # a worker drains its in-flight runs before it exits: let the step bodies return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        gate.unlink(missing_ok=True)
        gate_dir.rmdir()
    times = sorted(done.values())
    result = {
        "waiting": waiting,
        "inflight": inflight,
        "concurrency": concurrency,
        "lease_ttl_s": lease_ttl,
        "poll_s": poll,
        "recovery_max_s": round(times[-1], 3),
        "recovery_p50_s": round(statistics.median(times), 3),
        "inflight_recovery_max_s": round(max(done[i] for i in ids_in), 3) if ids_in else None,
        "completed": summary["completed"],
        "stuck": summary["stuck"],
        "takeover_claims": summary["takeovers"],
        "measured": "monotonic time from pg_ctl start returning (server accepts connections) to each workflow's "
        "terminal status being visible, polled every 20 ms",
    }
    out.write(json.dumps(result, indent=2) + "\n")
    return result


RESULTS = ROOT / "results" / "runtime_restart"
CONFIG_KEYS = ("waiting", "inflight", "concurrency", "lease_ttl_s", "poll_s")


def write_results(result: dict, command: str) -> None:
    """Record ``result`` in results/runtime_restart.json (one row per configuration, the newest
    run of each kept) and render results/runtime_restart.md from it.

    Args:
        result: ``run``'s figures.
        command: the command line that made them.
    """
    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
        or "unknown"
    )
    row = {**result, "command": command, "commit": commit, "machine": f"{os.cpu_count()} cores"}
    path = RESULTS.with_suffix(".json")
    rows = json.loads(path.read_text()) if path.exists() else []
    key = tuple(row[k] for k in CONFIG_KEYS)
    rows = [r for r in rows if tuple(r[k] for k in CONFIG_KEYS) != key] + [row]
    path.write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        "# Database restart: time to progress",
        "",
        "Made by `manage.py bench_restart` (each row's command below); one worker, the embedded "
        "PostgreSQL stopped (`pg_ctl stop -m fast`) and started under it. Time: " + rows[-1]["measured"] + ".",
        "",
        "| waiting | in a step | concurrency | lease (s) | poll (s) | slowest (s) | median (s) | "
        "in-step slowest (s) | completed | stuck | takeover claims | commit | command |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['waiting']} | {r['inflight']} | {r['concurrency']} | {r['lease_ttl_s']} | {r['poll_s']} | "
            f"{r['recovery_max_s']} | {r['recovery_p50_s']} | {r['inflight_recovery_max_s']} | "
            f"{r['completed']} | {r['stuck']} | {r['takeover_claims']} | {r['commit']} | `{r['command']}` |"
        )
    RESULTS.with_suffix(".md").write_text("\n".join(lines) + "\n")
