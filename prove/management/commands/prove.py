"""``manage.py prove <subcommand>``: the Prove harness's local peers (spec §11.2, design-notes §7).

Subcommands, one per peer process:

- ``target``: the local HTTP payment target (prove.target).
- ``proxy``: the TCP fault proxy (prove.fault_proxy).
- ``model-stub``: the Anthropic Messages API stub (prove.model_stub).

Each long-running subcommand prints one ready line first, ``listening 127.0.0.1:PORT`` (the
proxy adds `` control 127.0.0.1:PORT``), so a parent that asked for port 0 learns the port.
SIGTERM stops it cleanly.

Adding a subcommand (the scenario runner comes next): write a ``Subcommand`` subclass with
``name``, ``help``, ``add_arguments`` and ``run``, and list it in ``SUBCOMMANDS``.

This module also holds ``spawn_subcommand`` and ``stop_process``, the one way the harness and the
tests start these peers as real subprocesses.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

MANAGE_PY = Path(__file__).resolve().parents[3] / "manage.py"


class Subcommand:
    """One ``prove`` subcommand: its arguments and what it runs."""

    name: str = ""
    help: str = ""

    def add_arguments(self, parser) -> None:
        """Add this subcommand's arguments to its argparse sub-parser."""

    def run(self, options: dict, stdout) -> None:
        """Run with parsed ``options``; write the ready line to ``stdout``."""
        raise NotImplementedError


class TargetSubcommand(Subcommand):
    name = "target"
    help = "Serve the local HTTP payment target (tiers 1, 2, 3) over a SQLite ledger."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
        parser.add_argument("--tier", type=int, choices=[1, 2, 3], required=True)
        parser.add_argument(
            "--queryable",
            action="store_true",
            help="tier 1 only: also answer GET /refunds?key=K (Stripe-like lookup)",
        )
        parser.add_argument(
            "--ledger", required=True, help="SQLite ledger file (created if absent)"
        )
        parser.add_argument(
            "--access-log",
            default=None,
            help="JSON-lines access log (default: the ledger path with .access.jsonl)",
        )
        parser.add_argument(
            "--dedup-window",
            type=float,
            default=None,
            help="tier 1: seconds an idempotency key is remembered (default: until prune_keys)",
        )

    def run(self, options: dict, stdout) -> None:
        from prove.target import serve

        if options["tier"] == 3 and options["queryable"]:
            raise CommandError("tier 3 has no lookup; --queryable applies to tier 1 only")
        serve(
            host=options["host"],
            port=options["port"],
            tier=options["tier"],
            queryable=options["queryable"],
            ledger=options["ledger"],
            access_log=options["access_log"],
            dedup_window=options["dedup_window"],
            ready=lambda line: _ready(stdout, line),
        )


class ProxySubcommand(Subcommand):
    name = "proxy"
    help = "Run the TCP fault proxy (pass, delay, blackhole, reset) with an HTTP control API."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--listen-port", type=int, default=0, help="0 picks a free port")
        parser.add_argument("--upstream", required=True, help="HOST:PORT or unix:/path/to/socket")
        parser.add_argument("--control-port", type=int, default=0, help="0 picks a free port")

    def run(self, options: dict, stdout) -> None:
        from prove.fault_proxy import serve

        serve(
            host=options["host"],
            listen_port=options["listen_port"],
            upstream=options["upstream"],
            control_port=options["control_port"],
            ready=lambda line: _ready(stdout, line),
        )


class ModelStubSubcommand(Subcommand):
    name = "model-stub"
    help = (
        "Serve a local Anthropic Messages API stub with scripted amounts (EMULATED model variance)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=0, help="0 picks a free port")

    def run(self, options: dict, stdout) -> None:
        from prove.model_stub import serve

        serve(host=options["host"], port=options["port"], ready=lambda line: _ready(stdout, line))


SUBCOMMANDS: list[Subcommand] = [TargetSubcommand(), ProxySubcommand(), ModelStubSubcommand()]


def _ready(stdout, line: str) -> None:
    # The parent blocks on this first line, so it must not sit in a buffer.
    stdout.write(line + "\n")
    stdout.flush()


class Command(BaseCommand):
    help = "The Prove harness's local peers: target, proxy, model-stub."
    # The peers never touch the database; skipping checks keeps start-up short and keeps a
    # peer from depending on PostgreSQL being up.
    requires_system_checks = []

    def add_arguments(self, parser):
        subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for sub in SUBCOMMANDS:
            sub.add_arguments(subparsers.add_parser(sub.name, help=sub.help, description=sub.help))

    def handle(self, *args, subcommand: str, **options):
        by_name = {sub.name: sub for sub in SUBCOMMANDS}
        if subcommand not in by_name:
            raise CommandError(f"unknown subcommand {subcommand!r}")

        # SIGTERM becomes KeyboardInterrupt so the servers' shutdown paths run (files closed,
        # held connections released) exactly as for Ctrl-C.
        def _on_term(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, _on_term)
        try:
            by_name[subcommand].run(options, sys.stdout)
        except KeyboardInterrupt:
            pass


# -- subprocess helpers ----------------------------------------------------------------------


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
                    raise RuntimeError(
                        f"prove {subcommand} exited with code {code} before it was ready"
                    )
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
