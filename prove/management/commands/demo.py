"""``manage.py demo [--tier 1|2|3] [--approve-as NAME] [--crash POINT|none]``: the refund demo.

Exits non-zero when the ledger or the receipt disagrees with the expected outcome.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand

from ilr.killpoints import POINTS


class Command(BaseCommand):
    help = "Run the refund demo: decide, approve, SIGKILL a worker at a crash point, recover, verify."

    def add_arguments(self, parser):
        parser.add_argument("--tier", type=int, choices=[1, 2, 3], default=1)
        parser.add_argument("--approve-as", default="demo-approver",
                            help="the approver's name (stands in for a person)")
        parser.add_argument("--crash", default="effect_after_send", choices=[*POINTS, "none"],
                            help="kill point at which the first worker is SIGKILLed (default effect_after_send)")

    def handle(self, *args, tier, approve_as, crash, **options):
        from prove.demo import Demo

        status = Demo(tier=tier, approve_as=approve_as, crash=crash, out=self.stdout).run()
        if status:
            sys.exit(status)
