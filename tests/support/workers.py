"""Real worker subprocesses (``manage.py ilr_worker``), the commands run beside them, and the
evidence the invariants registry judges a test by."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import ROOT


class WorkerProcs:
    """Starts ``manage.py ilr_worker`` subprocesses; kills every one at teardown."""

    def __init__(self, tmp_path: Path):
        self.procs: dict[str, subprocess.Popen] = {}
        self.tmp_path = tmp_path

    def env(self, extra: dict | None = None) -> dict:
        from django.conf import settings

        env = dict(os.environ)
        env["ILR_DB_NAME"] = settings.DATABASES["default"]["NAME"]
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("ILR_KILL_AT", None)
        env.pop("ILR_STOP_AT", None)
        env.update(extra or {})
        return env

    def start(
        self,
        worker_id: str,
        *,
        lease_ttl: float = 2.0,
        poll: float = 0.1,
        concurrency: int = 4,
        env: dict | None = None,
        args: tuple = (),
    ) -> subprocess.Popen:
        log = open(self.tmp_path / f"{worker_id}.log", "ab")
        cmd = [
            sys.executable,
            str(ROOT / "manage.py"),
            "ilr_worker",
            "--id",
            worker_id,
            "--import",
            "tests.support.flows",
            "--import",
            "tests.support.flows_flow_control",
            "--import",
            "tests.support.flows_schedules",
            "--lease-ttl",
            str(lease_ttl),
            "--poll",
            str(poll),
            "--concurrency",
            str(concurrency),
            *args,
        ]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env(env), stdout=log, stderr=subprocess.STDOUT)
        self.procs[worker_id] = proc
        return proc

    def log(self, worker_id: str) -> str:
        return (self.tmp_path / f"{worker_id}.log").read_text(errors="replace")

    def kill(self, worker_id: str) -> None:
        proc = self.procs[worker_id]
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
        proc.wait(10)

    def kill_all(self) -> None:
        for worker_id in list(self.procs):
            self.kill(worker_id)

    def wait_state(self, worker_id: str, state: str, timeout: float = 20) -> None:
        """Wait until the process state letter (from /proc) is ``state`` ("T" stopped), or it exits ("X")."""
        proc = self.procs[worker_id]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if state == "X":
                    return
                raise AssertionError(f"{worker_id} exited with {proc.returncode}:\n{self.log(worker_id)}")
            try:
                letter = Path(f"/proc/{proc.pid}/stat").read_text().split(") ", 1)[1][0]
            except FileNotFoundError:
                letter = "X"
            if letter == state:
                return
            time.sleep(0.02)
        raise AssertionError(f"{worker_id} did not reach state {state} in {timeout}s:\n{self.log(worker_id)}")


def check(workers, *args):
    """``manage.py ilr_check ARGS`` on the workers' environment (the test database)."""
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "ilr_check", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=workers.env(),
    )


EVIDENCE: list[dict] = []
"""Ledgers and access logs of the payment targets a test ran (tests.support.refund_harness adds them)."""


def registry_results(test_dsn: str) -> dict:
    """Run the invariants registry over the test database with this test's evidence."""
    from ilr import _db as db
    from ilr._invariants import check_all

    evidence: dict = {"ledger": [], "access_log": []} if EVIDENCE else {}
    for ev in EVIDENCE:
        evidence["ledger"] += ev["ledger"]
        evidence["access_log"] += ev["access_log"]
    with db.connect(test_dsn) as conn:
        evidence["invocations"] = conn.execute(
            "select workflow_id, name, extract(epoch from at)::float8 as at from public.test_invocations"
        ).fetchall()
        return check_all(conn, evidence)
