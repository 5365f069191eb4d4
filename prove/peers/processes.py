"""Peer processes of the Prove harness: ``manage.py prove <subcommand>`` children (the target, the
fault proxy, the model stub) started, awaited on their ready line, and stopped."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

MANAGE_PY = Path(__file__).resolve().parents[2] / "manage.py"


def spawn_subcommand(
    subcommand: str, args: list[str], *, ready_timeout: float = 20.0, env: dict | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``python manage.py prove <subcommand> <args>`` and wait for its ready line.

    Args:
        subcommand: "target", "proxy" or "model-stub".
        args: further command-line arguments, as strings.
        ready_timeout: seconds to wait for the first stdout line.
        env: extra environment variables for the child.

    Returns:
        (process, ready line without its newline), e.g. "listening 127.0.0.1:40123".

    Raises:
        RuntimeError: the child exited, or printed nothing within ready_timeout; it is killed.
    """
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, str(MANAGE_PY), "prove", subcommand, *args],
        cwd=str(MANAGE_PY.parent),
        env=child_env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + ready_timeout
    line = ""
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"prove {subcommand}: no ready line within {ready_timeout}s")
            readable, _, _ = select.select([proc.stdout], [], [], remaining)
            if readable:
                line = proc.stdout.readline()
                if not line:
                    code = proc.wait(timeout=5)
                    raise RuntimeError(f"prove {subcommand} exited with code {code} before it was ready")
                return proc, line.strip()
    except BaseException:
        stop_process(proc)
        raise


def stop_process(proc: subprocess.Popen, *, timeout: float = 5.0) -> None:
    """Stop a spawned peer: SIGTERM, then SIGKILL after ``timeout`` seconds; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def parse_address(ready_line: str, word: str = "listening") -> tuple[str, int]:
    """Pull ``(host, port)`` after ``word`` out of a ready line.

    Args:
        ready_line: e.g. "listening 127.0.0.1:40123 control 127.0.0.1:40124".
        word: "listening" or "control".
    """
    parts = ready_line.split()
    host, _, port = parts[parts.index(word) + 1].rpartition(":")
    return host, int(port)
