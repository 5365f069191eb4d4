"""``manage.py bench [--quick] [--n N] [--workers W] [--concurrency C] [--rounds R] [--out DIR]``: the benchmark of
docs/protocol.md §16.7 (runtime vs the Temporal dev server vs the pgbench commit bound), written to
results/runtime_bench.{md,json} (or DIR). ``--core`` runs only the three-step runtime benchmark
(results/runtime_bench_core.*).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Benchmark the runtime against Temporal and the PostgreSQL commit bound."

    def add_arguments(self, parser):
        parser.add_argument("--n", type=int, default=1000)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--quick", action="store_true", help="N = 200 and a smaller scale run")
        parser.add_argument(
            "--rounds",
            type=int,
            default=1,
            help="repeat the 4-step run with its pgbench, and the serial gated effect, this many "
            "times; the targets are read from the median round",
        )
        parser.add_argument("--core", action="store_true", help="only the three-step runtime benchmark")
        parser.add_argument(
            "--out", default=None, help="directory for runtime_bench.{md,json} and the PNG (default: results/)"
        )

    def handle(self, *args, n, workers, concurrency, quick, core, rounds, out, **options):
        if core:
            from prove.bench.core import run_core, write_results

            write_results(run_core(200 if quick else n, workers, concurrency, out=self.stdout))
            return
        from prove.bench.full import run

        if rounds < 1:
            raise CommandError(f"--rounds must be at least 1, got {rounds}")
        report = run(n, workers, concurrency, quick, rounds, out=self.stdout, out_dir=Path(out) if out else None)
        self.stdout.write(
            f"ratio_vs_temporal {report['ratio_vs_temporal']}, ratio_vs_dbos {report['ratio_vs_dbos']}, "
            f"ratio_vs_commit_bound {report['ratio_vs_commit_bound']}"
        )
