"""One measurement of ``manage.py bench_tasks``: one backend, one worker configuration.

1. Warm-up: one task per worker slot, waited for (each worker imports the task and opens its
   connections); not counted.
2. Latency at low load: ``latency_n`` tasks one at a time, each enqueued alone (autocommit) after
   a random pause of 0 to 2 poll intervals with every worker idle, and waited for before the next.
3. Throughput: ``n`` tasks enqueued in one transaction (``transaction.atomic``, the calls of
   ``Task.enqueue``), the workers already running; throughput is n / (the last task's finished_at
   - the wall clock just before the first enqueue). Latency of each: its finished_at - enqueued_at
   (the backend's own stamps) and finished_at - the commit of the batch (the same origin for both).

Every task is checked: finished once (one attempt or claim), with the right return value.
"""

from __future__ import annotations

import random
import statistics
import time

from prove.bench.core import _pct
from prove.bench.proc_stats import cluster_cpu_seconds, machine_cpu, postmaster_pid
from prove.bench.tasks_backends import Backend
from prove.bench.tasks_workers import Workers


def ms_summary(values_s: list[float]) -> dict:
    ms = [v * 1000 for v in values_s]
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p95_ms": round(_pct(ms, 0.95), 2),
        "max_ms": round(max(ms), 2),
    }


def wait_done(mon, backend: Backend, total: int, timeout: float, pause: float) -> int:
    """Poll until ``total`` tasks are finished; returns the number of polls."""
    deadline = time.monotonic() + timeout
    polls = 0
    while True:
        polls += 1
        finished, _ = mon.execute(backend.done_sql).fetchone()
        if finished >= total:
            return polls
        if time.monotonic() > deadline:
            raise TimeoutError(f"{backend.key}: {finished} of {total} tasks finished in {timeout:g} s")
        time.sleep(pause)


def stamps(mon, backend: Backend, ids: list[str]) -> dict:
    """Each task's stamps, and the check that every one ran once with the right value."""
    rows = mon.execute(backend.stamps_sql, (ids,)).fetchall()
    bad = [r[0] for r in rows if not r[1] or r[4] != 1]
    return {
        "rows": rows,
        "found": len(rows),
        "ok": sum(1 for r in rows if r[1]),
        "ran_once": sum(1 for r in rows if r[4] == 1),
        "bad": bad[:5],
    }


def commits(mon) -> int:
    mon.execute("select pg_stat_clear_snapshot()")
    (n,) = mon.execute("select xact_commit from pg_stat_database where datname = current_database()").fetchone()
    return n


def measure(
    backend: Backend, workers: Workers, n: int, latency_n: int, mon, timeout: float = 600.0, profile_to=None
) -> dict:
    """Run the three phases on ``workers`` (not started yet; stopped on return). ``profile_to``: a
    path for py-spy's raw samples of the first worker process during the batch."""
    from django.db import transaction

    from prove.bench.cpu_profile import start_profiler, stop_profiler

    postmaster = postmaster_pid(mon)
    task = backend.task()
    mon.execute(backend.reset_sql)
    total = 0
    t_start = time.monotonic()
    workers.start(mon)
    t_up = time.monotonic()
    try:
        slots = workers.processes * workers.concurrency
        for i in range(slots):  # warm-up
            task.enqueue(i, 0)
        total += slots
        wait_done(mon, backend, total, timeout, 0.01)
        latency_ids = []
        for i in range(latency_n):
            time.sleep(random.uniform(0, 2 * workers.poll))
            latency_ids.append(str(task.enqueue(i, 2).id))
            total += 1
            wait_done(mon, backend, total, timeout, 0.002)
        t_low = time.monotonic()
        profiler = start_profiler(workers.procs[0].pid, profile_to) if profile_to else None
        c0, pg0, m0, w0 = commits(mon), cluster_cpu_seconds(postmaster), machine_cpu(), workers.cpu_seconds()
        t_first = time.time()
        with transaction.atomic():
            ids = [str(task.enqueue(i, 1).id) for i in range(n)]
        t_commit = time.time()
        total += n
        polls = wait_done(mon, backend, total, timeout, 0.02)
        pg_cpu, m1, w_cpu = cluster_cpu_seconds(postmaster) - pg0, machine_cpu(), workers.cpu_seconds() - w0
        if profiler is not None:
            stop_profiler(profiler)
    finally:
        workers.stop()
    time.sleep(1.5)  # the backends flush pg_stat_database at most every second; the workers' at exit
    commit_count = commits(mon) - c0 - polls - 2  # less this monitor's own polls and reads
    batch, low = stamps(mon, backend, ids), stamps(mon, backend, latency_ids)
    last = max(r[3] for r in batch["rows"])
    busy = (m1[0] - m0[0]) / max(1, m1[1] - m0[1])
    wall = last - t_first
    return {
        "backend": backend.key,
        "processes": workers.processes,
        "concurrency": workers.concurrency,
        "slots": workers.processes * workers.concurrency,
        "poll_s": workers.poll,
        "n": n,
        "throughput": {
            "tasks_per_s": round(n / wall, 1),
            "wall_s": round(wall, 3),
            "enqueue_s": round(t_commit - t_first, 3),
            "enqueue_ms_per_task": round((t_commit - t_first) / n * 1000, 3),
            "drain_tasks_per_s": round(n / (last - t_commit), 1),
            "latency": ms_summary([r[3] - r[2] for r in batch["rows"]]),
            "latency_from_commit": ms_summary([r[3] - t_commit for r in batch["rows"]]),
            "commits_per_task": round(commit_count / n, 2),
            "machine_busy_cores": round(busy * _cores(), 2),
            "postgres_cpu_ms_per_task": round(pg_cpu / n * 1000, 3),
            "worker_cpu_ms_per_task": round(w_cpu / n * 1000, 3),
        },
        "phases_s": {
            "workers_up": round(t_up - t_start, 1),
            "warm_up_and_low_load": round(t_low - t_up, 1),
            "batch_and_stop": round(time.monotonic() - t_low, 1),
        },
        "latency_low_load": {
            "n": latency_n,
            **ms_summary([r[3] - r[2] for r in low["rows"]]),
            "samples_ms": [round((r[3] - r[2]) * 1000, 2) for r in low["rows"]],
        },
        "checks": {
            "enqueued": n + latency_n,
            "found": batch["found"] + low["found"],
            "right_value": batch["ok"] + low["ok"],
            "ran_once": batch["ran_once"] + low["ran_once"],
            "bad_examples": batch["bad"] + low["bad"],
        },
    }


def _cores() -> int:
    import os

    return os.cpu_count() or 1
