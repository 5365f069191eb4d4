"""The demo's local peers on the command line: the payment target and the model stub, each a
subcommand of ``manage.py demo_peer`` (and of ``manage.py prove``, which adds the harness's fault
proxy). Each long-running subcommand prints one ready line first, ``listening 127.0.0.1:PORT``, so
a parent that asked for port 0 learns the port (demo.peers.processes); SIGTERM stops it cleanly.

Adding a subcommand: write a ``Subcommand`` subclass with ``name``, ``help``, ``add_arguments``
and ``run``, and list it where it is served (``PEERS`` below, or the harness's list).
"""

from __future__ import annotations

import signal

from django.core.management.base import CommandError


class Subcommand:
    """One peer subcommand (of ``demo_peer`` or ``prove``): its arguments and what it runs."""

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
        parser.add_argument("--ledger", required=True, help="SQLite ledger file (created if absent)")
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
        from demo.peers.target_server import serve

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
            ready=lambda line: ready(stdout, line),
        )


class ModelStubSubcommand(Subcommand):
    name = "model-stub"
    help = "Serve a local Anthropic Messages API stub with scripted amounts (EMULATED model variance)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=0, help="0 picks a free port")

    def run(self, options: dict, stdout) -> None:
        from demo.peers.model_stub import serve

        serve(host=options["host"], port=options["port"], ready=lambda line: ready(stdout, line))


PEERS: list[Subcommand] = [TargetSubcommand(), ModelStubSubcommand()]
"""The subcommands of ``manage.py demo_peer``."""


def ready(stdout, line: str) -> None:
    # The parent blocks on this first line, so it must not sit in a buffer.
    stdout.write(line + "\n")
    stdout.flush()


def serve_until_term(sub: Subcommand, options: dict, stdout) -> None:
    """Run ``sub`` until Ctrl-C or SIGTERM. SIGTERM becomes KeyboardInterrupt so the servers'
    shutdown paths run (files closed, held connections released) exactly as for Ctrl-C."""

    def _on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_term)
    try:
        sub.run(options, stdout)
    except KeyboardInterrupt:
        pass
