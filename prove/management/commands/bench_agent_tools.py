"""``manage.py bench_agent_tools [--framework pydantic-ai|...|all] [--n 200]``: the overhead of a gated
tool call over a plain tool call per agent framework (prove.bench.agent_tools); writes
results/agent_tools_bench.{md,json}. Runs on a fresh database (``ilr_agent_tools_bench``) of the
configured cluster."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Measure a gated tool call against a plain one per agent framework; write results/agent_tools_bench.md."

    def add_arguments(self, parser):
        from demo.agent_frameworks import NAMES

        parser.add_argument("--framework", default="all", help=f"{', '.join(NAMES)}, a comma list, or all")
        parser.add_argument("--n", type=int, default=200, help="measured rounds per framework (default 200)")

    def handle(self, *args, framework, n, **options):
        from demo.agent_frameworks import drivers
        from prove.bench.agent_tools import run, write_results

        try:
            chosen = drivers(framework)
        except ValueError as exc:
            raise CommandError(f"--framework: {exc}", returncode=2) from None
        if n < 1:
            raise CommandError("--n must be a positive number of rounds", returncode=2)
        report = run(chosen, n, out=self.stdout)
        path = write_results(report, " ".join(["python manage.py bench_agent_tools", *sys.argv[2:]]))
        self.stdout.write(f"wrote {path} and {path.with_suffix('.json')}")
