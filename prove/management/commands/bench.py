"""``manage.py bench [--n N] [--workers W] [--concurrency C] [--quick]``: the runtime benchmark.

Writes results/runtime_bench_core.{md,json}. ``--quick`` runs 200 workflows.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Benchmark the runtime: N three-step workflows over W workers."

    def add_arguments(self, parser):
        parser.add_argument("--n", type=int, default=1000)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--concurrency", type=int, default=4)
        parser.add_argument("--quick", action="store_true", help="200 workflows")

    def handle(self, *args, n, workers, concurrency, quick, **options):
        from prove.bench import run_core, write_results

        result = run_core(200 if quick else n, workers, concurrency, out=self.stdout)
        write_results(result)
