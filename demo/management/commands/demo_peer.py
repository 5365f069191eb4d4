"""``manage.py demo_peer target|model-stub``: one of the demo's local peers (demo.peers.serving),
the local HTTP payment target or the Anthropic Messages API stub, until Ctrl-C or SIGTERM.

Each prints one ready line first, ``listening 127.0.0.1:PORT``, so a parent that asked for port 0
learns the port (demo.peers.processes starts them so).
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from demo.peers.serving import PEERS, serve_until_term


class Command(BaseCommand):
    help = "Run one of the demo's local peers: the payment target (target) or the model stub (model-stub)."
    # The peers never touch the database; skipping checks keeps start-up short and keeps a
    # peer from depending on PostgreSQL being up.
    requires_system_checks = []

    def add_arguments(self, parser):
        subparsers = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for sub in PEERS:
            sub.add_arguments(subparsers.add_parser(sub.name, help=sub.help, description=sub.help))

    def handle(self, *args, subcommand: str, **options):
        by_name = {sub.name: sub for sub in PEERS}
        if subcommand not in by_name:
            raise CommandError(f"unknown subcommand {subcommand!r}")
        serve_until_term(by_name[subcommand], options, sys.stdout)
