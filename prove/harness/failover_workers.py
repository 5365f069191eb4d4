"""The processes of the failover run (prove/harness/failover.py): ``manage.py ilr_worker``
subprocesses reaching the clusters through one multi-host URL (``Workers``), the thread that
signals each workflow through the failover (``Signaller``), and the primary's WAL sender (which
the async mode SIGSTOPs)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg

from prove.harness.failover_checks import connect
from prove.peers.pg_cluster import Cluster
from prove.queries import FAILOVER_GO_SIGNALS

ROOT = Path(__file__).resolve().parents[2]


class Workers:
    """``manage.py ilr_worker`` subprocesses with DATABASE_URL set; stopped by ``close``."""

    def __init__(self, url: str, logs: Path, lease_ttl: float):
        self.url, self.logs, self.lease_ttl = url, logs, lease_ttl
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self) -> dict:
        env = dict(os.environ, DATABASE_URL=self.url, PYTHONUNBUFFERED="1")
        env.pop("ILR_DB_NAME", None)
        return env

    def start(self, wid: str) -> None:
        log = open(self.logs / f"{wid}.log", "ab")  # noqa: SIM115 - the child holds it
        self.procs[wid] = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "ilr_worker",
                "--id",
                wid,
                "--import",
                "prove.harness.failover",
                "--only",
                "failover_pay@1",
                "--lease-ttl",
                str(self.lease_ttl),
                "--poll",
                "0.5",
                "--concurrency",
                "4",
            ],
            cwd=ROOT,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def log_text(self) -> str:
        return "\n".join((self.logs / f"{w}.log").read_text(errors="replace") for w in self.procs)


class Signaller(threading.Thread):
    """Sends "go" to each workflow in turn, every ``interval`` seconds, retrying through the
    failover; records each acknowledged signal (its payload) and can re-send lost ones."""

    def __init__(self, dsn: str, ids: list[str], interval: float):
        super().__init__(daemon=True)
        self.dsn, self.ids, self.interval = dsn, list(ids), interval
        self.acked: dict[str, dict] = {}
        self.resent = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def send(self, wf_id: str, payload: dict) -> None:
        from ilr import signal_in

        while not self.stop.is_set():
            try:
                with connect(self.dsn) as conn, conn.transaction():
                    signal_in(conn, wf_id, "go", payload, sender="failover-harness")
                self.acked[wf_id] = payload
                return
            except psycopg.OperationalError:
                time.sleep(0.1)  # the primary is gone and the standby not promoted yet

    def run(self) -> None:
        try:
            for wf_id in self.ids:
                if self.stop.wait(self.interval):
                    return
                self.send(wf_id, {"wf": wf_id, "attempt": 1})
        except BaseException as exc:  # noqa: BLE001 - reported by the harness
            self.error = exc

    def resend_lost(self, conn) -> int:
        """Re-send every acknowledged signal the database lacks; returns how many."""
        have = {r["workflow_id"] for r in conn.execute(FAILOVER_GO_SIGNALS)}
        lost = [w for w in list(self.acked) if w not in have]
        for wf_id in lost:
            self.send(wf_id, {"wf": wf_id, "attempt": self.acked[wf_id]["attempt"] + 1})
        self.resent += len(lost)
        return len(lost)


def walsender_pid(primary: Cluster) -> int:
    return int(primary.psql("select pid from pg_stat_replication where application_name = 'standby1'"))
