"""``manage.py demo [--tier 1|2|3] [--approve-as NAME] [--crash POINT|none]``: the refund demo.

Exits non-zero when the ledger or the receipt disagrees with the expected outcome.

``manage.py demo --serve [--port N] [--tier 1|2|3]`` instead runs gunicorn with the admin and the
review UI, leaves a refund waiting for approval, and prints the URL and a demo-only login; it
serves until Ctrl-C (or ``--serve-for SECONDS``). ``--approve-as`` and ``--crash`` do not apply.
"""

from __future__ import annotations

import argparse
import sys

from django.core.management.base import BaseCommand

from ilr.killpoints import POINTS


def _approver(value: str) -> str:
    """--approve-as: refused before anything starts, as rt.approve would refuse it later."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must name the approver (a non-empty string)")
    return value


class Command(BaseCommand):
    help = "Run the refund demo: decide, approve, SIGKILL a worker at a crash point, recover, verify."

    def add_arguments(self, parser):
        """--tier, --approve-as, --crash; --serve, --port, --serve-for."""
        parser.add_argument("--tier", type=int, choices=[1, 2, 3], default=1)
        parser.add_argument("--approve-as", default="demo-approver", type=_approver,
                            help="the approver's name (stands in for a person)")
        parser.add_argument("--crash", default="effect_after_send", choices=[*POINTS, "none"],
                            help="kill point at which the first worker is SIGKILLed (default effect_after_send)")
        parser.add_argument("--serve", action="store_true",
                            help="serve the admin and the review UI (gunicorn) with a refund waiting for approval")
        parser.add_argument("--port", type=int, default=8000, help="--serve: the port on 127.0.0.1 (0: any free one)")
        parser.add_argument("--serve-for", type=float, default=None,
                            help="--serve: stop after this many seconds (default: until Ctrl-C)")

    def handle(self, *args, tier, approve_as, crash, serve, port, serve_for, **options):
        """Run the demo (or serve the UI); exit with its status."""
        if serve:
            from prove.demo import ServeDemo

            status = ServeDemo(tier=tier, out=self.stdout, port=port, serve_for=serve_for).serve()
        else:
            from prove.demo import Demo

            status = Demo(tier=tier, approve_as=approve_as, crash=crash, out=self.stdout).run()
        if status:
            sys.exit(status)
