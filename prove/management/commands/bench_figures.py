"""``manage.py bench_figures [--workflows N] [--rounds R]``: the cost of the operations figures
(``ilr._telemetry.figures.figures_on``) on a database of N workflows (prove.bench.figures): each
statement's plan and time, and one read's p50 and p99, with and without the two partial
indexes of migration 0022; writes results/figures_cost.md and .json (``--out``: another name)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Measure the operations figures' read: plans and time on a database of many workflows."

    def add_arguments(self, parser):
        parser.add_argument("--workflows", type=int, default=100_000)
        parser.add_argument("--rounds", type=int, default=200, help="timed reads each way (default 200)")
        parser.add_argument("--out", default="figures_cost", help="results/<OUT>.md and .json")

    def handle(self, *args, workflows, rounds, out, **options):
        from prove.bench.figures import run, write_results

        result = run(workflows, rounds, out=self.stdout)
        write_results(result, "python manage.py bench_figures " + " ".join(sys.argv[2:]), out)
