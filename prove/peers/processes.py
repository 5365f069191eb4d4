"""The harness's peer processes: ``manage.py prove <subcommand>`` children (the fault proxy; the
payment target and the model stub are the demo's, started through demo.peers.processes), started,
awaited on their ready line, and stopped."""

from __future__ import annotations

import subprocess

from demo.peers.processes import spawn_manage


def spawn_subcommand(
    subcommand: str, args: list[str], *, ready_timeout: float = 20.0, env: dict | None = None
) -> tuple[subprocess.Popen, str]:
    """Start ``python manage.py prove <subcommand> <args>`` and wait for its ready line, as
    demo.peers.processes.spawn_manage."""
    return spawn_manage(["prove", subcommand, *args], ready_timeout=ready_timeout, env=env)
