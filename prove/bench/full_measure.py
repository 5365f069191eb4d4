"""The measurements of ``manage.py bench`` (prove/bench/full.py), one function each: N workflows
on the runtime or on Temporal, the serial floors, the commit bound's inputs (CPU, RSS), the
py-spy profile; on a fresh database (``ilr_bench``) of the configured cluster."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import prove.bench.full_flows  # noqa: F401 - registers the bench workflows so rt.start resolves them
from demo.peers.targets_client import http_json
from ilr import _db as db
from prove.bench.core import ROOT, _pct

LABEL = "one 2-core machine; Temporal is the dev server with SQLite, not a production cluster"
BENCH_DB = "ilr_bench"
TARGET_DELAY_S = 0.020


def _fresh_db() -> str:
    base = db.conninfo()
    name = base.split("dbname=")[1].split()[0]
    with db.connect(base) as conn:
        conn.execute(f'drop database if exists "{BENCH_DB}" with (force)')
        conn.execute(f'create database "{BENCH_DB}"')
    env = {**os.environ, "ILR_DB_NAME": BENCH_DB}
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    return base.replace(f"dbname={name}", f"dbname={BENCH_DB}")


def _postgres_cpu_seconds() -> float:
    """utime + stime of every postgres process (the server's CPU), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if "(postgres)" not in stat:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _cpu_seconds(pid: int) -> float:
    """utime + stime of one process (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat: busy is everything but
    idle and iowait (user, system, irq and softirq of every process and the kernel)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(fields[:8])
    return total - fields[3] - fields[4], total


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


BENCH_LEASE_TTL = 3.0
"""Seconds. Short, so the heartbeat thread renews (every 1 s) during a run of a few seconds and
its worst gap under full load is measured; every fenced write renews the lease as well."""

HEARTBEAT_LINE = re.compile(r"heartbeat: (\d+) beats, worst gap ([0-9.]+) s \(schedule ([0-9.]+) s\)")


def run_runtime(
    shape: str, n: int, workers: int, concurrency: int, env_extra: dict, inputs, profile_to: Path | None = None
) -> dict:
    """N workflows of ``shape`` ("bench_steps4" or "bench_refund") over W worker subprocesses.

    ``inputs(i, grant_id)`` builds workflow i's input; the refund shape's policy grant is issued
    on the fresh database first. With ``profile_to``, py-spy samples the first worker while the
    workflows run and writes its raw (collapsed) stacks there.
    """
    dsn = _fresh_db()
    grant = _policy_grant(dsn) if shape == "bench_refund" else None
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
        time.sleep(3)
        with db.connect(dsn) as conn:
            before = conn.execute("select xact_commit from pg_stat_database where datname = %s", (BENCH_DB,)).fetchone()
            cpu0 = _postgres_cpu_seconds()
            worker_cpu0 = sum(_cpu_seconds(p.pid) for p in procs)  # start-up (imports) is not the run's cost
            machine0 = _machine_cpu()
            profiler = _start_profiler(procs[0].pid, profile_to) if profile_to else None
            t0 = time.monotonic()
            with conn.cursor() as cur:
                cur.executemany(
                    "insert into ilr.workflows (id, name, version, input) values (%s, %s, '1', %s::jsonb)",
                    [(f"{shape}-{i}", shape, json.dumps(inputs(i, grant))) for i in range(n)],
                )
            while (
                conn.execute(
                    "select count(*) as c from ilr.workflows where status in ('completed','failed','stuck')"
                ).fetchone()["c"]
                < n
            ):
                if time.monotonic() - t0 > 900:
                    raise TimeoutError(f"{shape}: not finished in 900 s")
                time.sleep(0.05)
            wall = time.monotonic() - t0
            cpu = _postgres_cpu_seconds() - cpu0
            machine1 = _machine_cpu()
            if profiler is not None:
                _stop_profiler(profiler)
            failures = _failures(conn, shape)
            effect_statuses = _effect_statuses(conn)
            # A claim of a workflow that was running is a takeover: its owner's lease had lapsed.
            takeovers = conn.execute("select count(*) as c from ilr.claims where prev_status = 'running'").fetchone()[
                "c"
            ]
            rss = max(_peak_rss_mb(p.pid) for p in procs)
            worker_cpu = sum(_cpu_seconds(p.pid) for p in procs) - worker_cpu0
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
            e2e = [
                r["s"]
                for r in conn.execute(
                    "select extract(epoch from updated_at - created_at)::float8 as s from ilr.workflows"
                ).fetchall()
            ]
            effect_ms = [
                r["ms"]
                for r in conn.execute(
                    "select extract(epoch from s.created_at - p.created_at)::float8 * 1000 as ms from ilr.steps s "
                    "join ilr.steps p on p.workflow_id = s.workflow_id and p.seq = s.seq - 1 where s.kind = 'effect'"
                )
            ]
            per_call = [
                r["s"]
                for r in conn.execute(
                    "select extract(epoch from created_at - lag(created_at) over "
                    "(partition by workflow_id order by seq))::float8 as s from ilr.steps"
                ).fetchall()
                if r["s"] is not None
            ]
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
        "workflows_per_s_per_busy_core": round(n / wall / busy, 1) if busy else None,
        "heartbeats": sum(int(m[1]) for m in heartbeats if m),
        "worst_heartbeat_gap_s": max((float(m[2]) for m in heartbeats if m), default=None),
        "heartbeat_schedule_s": round(BENCH_LEASE_TTL / 3, 3),
        "e2e_ms": [round(x * 1000, 2) for x in e2e],
        "effect_ms": effect_ms,
    }


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
        {"workflow_id": r["id"], "status": r["status"], "error": r["error"]}
        for r in conn.execute("select id, status, error from ilr.workflows where status <> 'completed' order by id")
    ]
    if shape == "bench_refund":
        rows += [
            {"workflow_id": r["workflow_id"], "effect_status": r["output"].get("status"), "output": r["output"]}
            for r in conn.execute(
                "select workflow_id, output from ilr.steps where kind = 'effect' order by workflow_id"
            )
            if not EffectResult(r["output"].get("status", ""), "").committed
        ]
    return rows


def _effect_statuses(conn) -> dict[str, int]:
    """{EffectResult status: count} over the run's recorded effect steps."""
    return {
        r["status"]: r["n"]
        for r in conn.execute(
            "select output->>'status' as status, count(*) as n from ilr.steps where kind = 'effect' "
            "group by 1 order by 1"
        )
    }


def _start_profiler(pid: int, out: Path) -> subprocess.Popen | None:
    """py-spy sampling ``pid`` (250 Hz, without pausing it, only the thread holding the GIL: where
    the worker's Python CPU goes) until _stop_profiler.
    None, with a note on stderr, when py-spy is not installed."""
    import shutil

    exe = shutil.which("py-spy")
    if exe is None:
        sys.stderr.write("bench: py-spy not found (pip install py-spy); no CPU profile\n")
        return None
    proc = subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--nonblocking",
            "--gil",
            "--format",
            "raw",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # attach before the workflows are inserted
    return proc


def _stop_profiler(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


PROFILE_GROUPS = (
    ("statements: ilr.batch and psycopg (building, sending, reading)", ("psycopg/", "ilr/_db/batch.py")),
    ("json and canonical encoding", ("json/", "ilr/_codec.py")),
    ("journal sealing (sha256, Ed25519)", ("ilr/_journal/journal.py", "cryptography/")),
    # Substrings of a frame's file: "ilr/context" is ilr/_context/context.py and every ilr/context_*.py.
    (
        "the worker loop, replay and step bookkeeping",
        ("ilr/worker", "ilr/_worker/claims.py", "ilr/_worker/run.py", "ilr/context", "ilr/_db/store.py"),
    ),
    ("threads and queues", ("threading.py", "concurrent/futures", "queue.py")),
)


def profile_summary(raw: Path, top: int = 12) -> dict:
    """Summarize py-spy raw stacks: the share of samples by leaf function and by group.

    Returns {"samples", "top_self": [[function, share]], "groups": [[group, share]]}; shares are
    fractions of all samples (taken with --gil: the thread holding the GIL, so this is where the
    worker's Python CPU went, waits on PostgreSQL excluded).
    """
    from collections import Counter

    leaf: Counter = Counter()
    groups: Counter = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frame = stack.split(";")[-1]
        leaf[re.sub(r"\(.*/(site-packages/|lib/python3\.\d+/)?", "(", frame)] += n
        group = next((g for g, keys in PROFILE_GROUPS if any(k in frame for k in keys)), "other")
        groups[group] += n
    share = lambda c: round(c / total, 3) if total else 0.0  # noqa: E731
    return {
        "samples": total,
        "top_self": [[f, share(c)] for f, c in leaf.most_common(top)],
        "groups": [[g, share(c)] for g, c in groups.most_common()],
    }


RESULT_POLL_S = 0.02
"""Seconds between the serial runs' result polls (the figures are server-side)."""


def run_serial_runtime(n: int = 100) -> dict:
    """4-step workflows one at a time (one worker, concurrency 1): the latency floor."""
    from ilr import Runtime

    dsn = _fresh_db()
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
        server = [
            r["s"] * 1000
            for r in rt.connection()
            .execute("select extract(epoch from updated_at - created_at)::float8 as s from ilr.workflows")
            .fetchall()
        ]
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


SERIAL_PHASES_SQL = """
select extract(epoch from c.claimed_at - w.created_at) * 1000 as "start to claim",
       extract(epoch from s1.created_at - c.claimed_at) * 1000 as "claim to step 1",
       extract(epoch from s4.created_at - s1.created_at) / 3 * 1000 as "each of steps 2 to 4",
       extract(epoch from w.updated_at - s4.created_at) * 1000 as "step 4 to finish"
  from ilr.workflows w
  join ilr.claims c on c.workflow_id = w.id
  join ilr.steps s1 on s1.workflow_id = w.id and s1.seq = 1
  join ilr.steps s4 on s4.workflow_id = w.id and s4.seq = 4
 where w.status = 'completed'
"""
"""The serial 4-step workflows' phases on the database clock (each stamp a transaction's now():
the start's insert, the claim, the step records, the finish); one claim per workflow here."""


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

    dsn = _fresh_db()
    grant = _policy_grant(dsn)
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
        machine0 = _machine_cpu()
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
        machine1 = _machine_cpu()
        return wall, e2e, (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * os.cpu_count()

    try:
        wall, e2e, busy = asyncio.run(drive())
        rss = max(_peak_rss_mb(p.pid) for p in procs)
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


def _policy_grant(dsn: str) -> str:
    """A pre-issued policy grant for the refund shape (no approval wait)."""
    from ilr import grant_in

    with db.connect(dsn) as conn, conn.transaction():
        return grant_in(conn, "bench_refund", "refund", by="bench-policy", max_cents=1_000_000)
