"""The worker processes of ``manage.py bench_tasks``: ``ilr_worker`` for Interlock, django-tasks-db's
``db_worker`` for its backend, started with the bench's settings and stopped by their ids.

Interlock: ``processes`` workers of ``concurrency`` run threads each, serving queue "default"; they
wake on the row's NOTIFY and poll every ``poll`` s as a fallback. db_worker runs one task at a
time per process and polls every ``poll`` s when it finds nothing (``--interval``); its slots are
its processes.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from prove.bench.core import ROOT
from prove.queries import TASKS_BENCH_WORKERS_UP_SQL

MANAGE = str(ROOT / "manage.py")


def worker_argv(kind: str, k: int, concurrency: int, poll: float) -> list[str]:
    """The command line of worker ``k`` of ``kind`` ("interlock" or "db")."""
    if kind == "interlock":
        return [
            sys.executable,
            MANAGE,
            "ilr_worker",
            "--id",
            f"ti{k}",
            "--queue",
            "default",
            "--concurrency",
            str(concurrency),
            "--poll",
            f"{poll:g}",
            "--lease-ttl",
            "30",
        ]
    return [
        sys.executable,
        MANAGE,
        "db_worker",
        "--backend",
        "db",
        "--queue-name",
        "default",
        "--interval",
        f"{poll:g}",
        "--worker-id",
        f"td{k}",
        "--no-startup-delay",
        "--no-reload",
        "-v0",
    ]


class Workers:
    """``processes`` workers of ``kind``; ``start`` returns once each is polling."""

    def __init__(self, kind: str, processes: int, concurrency: int, poll: float, env: dict, log_dir: Path):
        self.kind, self.processes, self.concurrency, self.poll = kind, processes, concurrency, poll
        self.env, self.log_dir = env, log_dir
        self.procs: list[subprocess.Popen] = []

    def start(self, mon, timeout: float = 120.0) -> None:
        """Start the processes and wait until each is connected and idle (``mon``: a psycopg
        connection to the bench database)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        (since,) = mon.execute("select clock_timestamp()").fetchone()
        for k in range(self.processes):
            log = open(self.log_dir / f"{self.kind}-{k}.log", "wb")  # noqa: SIM115 - the child holds it
            self.procs.append(
                subprocess.Popen(
                    worker_argv(self.kind, k, self.concurrency, self.poll),
                    cwd=ROOT,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            log.close()
        deadline = time.monotonic() + timeout
        while not self._ready(mon, since):
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{self.kind} worker exited with {p.returncode}: see {self.log_dir}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.kind} workers not up in {timeout:g} s")
            time.sleep(0.1)
        time.sleep(2 * self.poll + 0.5)  # past each one's first poll

    def _ready(self, mon, since) -> bool:
        if self.kind == "interlock":  # registered: each has its worker_deployments row
            (n,) = mon.execute(TASKS_BENCH_WORKERS_UP_SQL).fetchone()
        else:  # each db_worker's first poll opens its one connection
            (n,) = mon.execute(
                "select count(*) from pg_stat_activity where datname = current_database() "
                "and backend_type = 'client backend' and backend_start >= %s "
                "and application_name not in ('bench_tasks', 'ilr')",
                (since,),
            ).fetchone()
        return n >= self.processes

    def cpu_seconds(self) -> float:
        """utime + stime of every worker process so far (their threads included)."""
        from prove.bench.proc_stats import cpu_seconds

        return sum(cpu_seconds(p.pid) for p in self.procs if p.poll() is None)

    def stop(self) -> None:
        """SIGTERM each worker (both kinds stop cleanly on it), then wait; SIGKILL a straggler."""
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
        self.procs = []
