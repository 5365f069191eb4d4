"""``manage.py bench [--quick] [--n N] [--workers W] [--concurrency C]``: the benchmark of
spec §11.6.4 (runtime vs the Temporal dev server vs the pgbench commit bound), written to
results/runtime_bench.{md,json}. ``--core`` runs only the three-step runtime benchmark
(results/runtime_bench_core.*).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Benchmark the runtime against Temporal and the PostgreSQL commit bound."

    def add_arguments(self, parser):
        parser.add_argument("--n", type=int, default=1000)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--quick", action="store_true", help="N = 200 and a smaller scale run")
        parser.add_argument("--core", action="store_true", help="only the three-step runtime benchmark")

    def handle(self, *args, n, workers, concurrency, quick, core, **options):
        if core:
            from prove.bench import run_core, write_results

            write_results(run_core(200 if quick else n, workers, concurrency, out=self.stdout))
            return
        from prove.bench_full import run

        report = run(n, workers, concurrency, quick, out=self.stdout)
        self.stdout.write(f"ratio_vs_temporal {report['ratio_vs_temporal']}, "
                          f"ratio_vs_commit_bound {report['ratio_vs_commit_bound']}")
