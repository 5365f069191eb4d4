"""Peer processes: ``manage.py`` children that print one ready line (``manage.py demo_peer target``,
``demo_peer model-stub``; the harness's ``manage.py prove proxy``), started, awaited on that line,
and stopped."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

MANAGE_PY = Path(__file__).resolve().parents[2] / "manage.py"


def spawn_peer(subcommand: str, args: list[str], **kwargs) -> tuple[subprocess.Popen, str]:
    """Start ``python manage.py demo_peer <subcommand> <args>`` ("target" or "model-stub") and wait
    for its ready line, as ``spawn_manage``."""
    return spawn_manage(["demo_peer", subcommand, *args], **kwargs)


def spawn_manage(
    argv: list[str], *, ready_timeout: float = 20.0, env: dict | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``python manage.py <argv>`` and wait for its ready line.

    Args:
        argv: the command and its arguments, as strings (``["demo_peer", "target", "--tier", "1"]``).
        ready_timeout: seconds to wait for the first stdout line.
        env: extra environment variables for the child.

    Returns:
        (process, ready line without its newline), e.g. "listening 127.0.0.1:40123".

    Raises:
        RuntimeError: the child exited, or printed nothing within ready_timeout; it is killed.
    """
    name = " ".join(argv[:2])
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, str(MANAGE_PY), *argv],
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
                raise RuntimeError(f"{name}: no ready line within {ready_timeout}s")
            readable, _, _ = select.select([proc.stdout], [], [], remaining)
            if readable:
                line = proc.stdout.readline()
                if not line:
                    code = proc.wait(timeout=5)
                    raise RuntimeError(f"{name} exited with code {code} before it was ready")
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
