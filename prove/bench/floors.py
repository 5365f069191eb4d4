"""The bench's serial floors (``manage.py bench``, prove/bench/full.py): 4-step workflows and gated
effects one at a time (the latency floors, without queueing), the serial workflows' phases on the
database clock, and what one round trip and one commit cost after an idle wait."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import prove.bench.full_flows  # noqa: F401 - registers the bench workflows so rt.start resolves them
from ilr import _db as db
from prove.bench.core import ROOT, _pct
from prove.bench.full_measure import BENCH_DB, TARGET_DELAY_S, fresh_db, policy_grant
from prove.queries import SERIAL_PHASES_SQL, WORKFLOW_DURATIONS

RESULT_POLL_S = 0.02
"""Seconds between the serial runs' result polls (the figures are server-side)."""


def run_serial_runtime(n: int = 100) -> dict:
    """4-step workflows one at a time (one worker, concurrency 1): the latency floor."""
    from ilr import Runtime

    dsn = fresh_db()
    env = {**os.environ, "ILR_DB_NAME": BENCH_DB, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "ilr_worker",
            "--id",
            "serial",
            "--import",
            "prove.bench.full_flows",
            "--only",
            "bench_steps4@1",
            "--lease-ttl",
            "30",
            "--poll",
            "1.0",
            "--concurrency",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(3)
        rt = Runtime(dsn)
        # The figures are server-side (database timestamps). The client waits with a 20 ms poll:
        # a tighter poll is a second busy process on the same two cores and slows what it times.
        for i in range(n):
            rt.start("bench_steps4", f"serial-{i}", {})
            rt.result(f"serial-{i}", timeout=30, poll=RESULT_POLL_S)
        server = [r["s"] * 1000 for r in rt.connection().execute(WORKFLOW_DURATIONS).fetchall()]
        phases = serial_phases(rt.connection())
        rt.close()
    finally:
        proc.terminate()
        proc.wait(30)
    return {
        "n": n,
        "serial_p50_ms": round(statistics.median(server), 2),
        "phases_p50_ms": phases,
        "note": "worker poll 1 s: each start wakes the idle worker by LISTEN/NOTIFY; server-side = "
        "completed updated_at - created_at (database clock)",
    }


def serial_phases(conn) -> dict[str, float]:
    """The p50 (ms) of each phase of SERIAL_PHASES_SQL over the completed workflows."""
    rows = conn.execute(SERIAL_PHASES_SQL).fetchall()
    if not rows:
        return {}
    return {name: round(statistics.median(float(r[name]) for r in rows), 3) for name in rows[0]}


def run_serial_effect(target_url: str, n: int = 50, first_payment: int = 0) -> dict:
    """Gated effects one at a time (one worker, concurrency 1): what ``ctx.effect`` adds over
    the target's own latency, without queueing.

    Each ``bench_effect_timed`` workflow measures, inside the worker process, a straight call of
    the target (the same LocalRefunds client, a fresh key) and then its own ``ctx.effect`` call:
    the pre-read, T_dispatch, the watchdog, the send, the response log and T_commit. The
    overhead is p50(effect) - p50(direct), in ms.

    Workflow i uses payments pay{first_payment + i} (the effect) and pay{first_payment + i + n}
    (the straight call), and its own effect key, so repeated rounds against one target never
    meet the target's idempotency record of an earlier round.
    """
    from ilr import Runtime

    dsn = fresh_db()
    grant = policy_grant(dsn)
    tspec = {"url": target_url, "tier": 1, "queryable": True, "send_timeout": 10, "settle_margin": 5}
    env = {**os.environ, "ILR_DB_NAME": BENCH_DB, "PYTHONUNBUFFERED": "1"}
    env.pop("ILR_KILL_AT", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "ilr_worker",
            "--id",
            "serial-effect",
            "--import",
            "prove.bench.full_flows",
            "--only",
            "bench_effect_timed@1",
            "--lease-ttl",
            "30",
            "--poll",
            "1.0",
            "--concurrency",
            "1",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        time.sleep(3)
        rt = Runtime(dsn)
        results = []
        for i in range(first_payment, first_payment + n):
            wf = f"serial-effect-{i}"
            rt.start(
                "bench_effect_timed",
                wf,
                {
                    "id": f"se{i}",
                    "payment": f"pay{i}",
                    "direct_payment": f"pay{i + n}",
                    "target": tspec,
                    "grant_id": grant,
                },
            )
            results.append(rt.result(wf, timeout=30, poll=RESULT_POLL_S))
        rt.close()
    finally:
        proc.terminate()
        proc.wait(30)
    committed = [r for r in results if r["status"] == "COMMITTED"]
    effect = [r["effect_ms"] for r in committed]
    direct = [r["direct_ms"] for r in committed]
    return {
        "n": n,
        "committed": len(committed),
        "effect_p50_ms": round(statistics.median(effect), 2),
        "effect_p99_ms": round(_pct(effect, 0.99), 2),
        "direct_call_p50_ms": round(statistics.median(direct), 2),
        "overhead_p50_ms": round(statistics.median(effect) - statistics.median(direct), 2),
        "note": "both timed inside the worker process on its monotonic clock: effect = the ctx.effect call; "
        "direct = LocalRefunds.apply with a fresh key, one at a time",
    }


def run_wake_floor(n: int = 200, idle_s: float = TARGET_DELAY_S) -> dict:
    """What one round trip and one commit cost on this machine right after an idle wait as long
    as the target's service delay, against back to back: the floor under the gated effect's
    overhead, whose T_commit starts when the send returns.

    On one plain psycopg connection to the bench database, from this process: ``select 1``
    (one round trip) and a one-row INSERT in autocommit (one round trip and one WAL flush),
    ``n`` times each, back to back and after ``time.sleep(idle_s)``.

    Returns:
        {"n", "idle_ms", "select1_hot_p50_ms", "select1_after_idle_p50_ms",
        "commit_hot_p50_ms", "commit_after_idle_p50_ms"}.
    """
    base = db.conninfo()
    name = base.split("dbname=")[1].split()[0]
    out: dict = {"n": n, "idle_ms": round(idle_s * 1000, 1)}
    with db.connect(base.replace(f"dbname={name}", f"dbname={BENCH_DB}")) as conn:
        conn.execute("create table if not exists public.bench_wake_floor (id bigserial primary key, at timestamptz)")
        statements = {"select1": "select 1", "commit": "insert into public.bench_wake_floor (at) values (now())"}
        for key, sql in statements.items():
            for label, pause in (("hot", 0.0), ("after_idle", idle_s)):
                took = []
                for _ in range(n):
                    if pause:
                        time.sleep(pause)
                    t = time.perf_counter()
                    conn.execute(sql)
                    took.append((time.perf_counter() - t) * 1000)
                out[f"{key}_{label}_p50_ms"] = round(statistics.median(took), 3)
        conn.execute("drop table public.bench_wake_floor")
    return out
