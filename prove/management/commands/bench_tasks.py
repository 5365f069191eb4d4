"""``manage.py bench_tasks [--n N] [--workers W] [--concurrency C] [--rounds R] [--latency-n L]
[--poll S] [--out DIR]``: Interlock's Django Tasks backend against django-tasks-db's
DatabaseBackend on the same PostgreSQL (issue 41), written to results/tasks_bench/ (or DIR):
report.md and raw.json. The method is in prove/bench/tasks_harness.py and tasks_measure.py.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

DEFAULT_OUT = Path(__file__).resolve().parents[3] / "results" / "tasks_bench"


class Command(BaseCommand):
    help = "Benchmark ilr.tasks.InterlockBackend against django-tasks-db's DatabaseBackend."

    def add_arguments(self, parser):
        parser.add_argument("--n", type=int, default=1000, help="tasks in each throughput batch (default 1000)")
        parser.add_argument("--workers", type=int, default=2, help="Interlock worker processes (default 2)")
        parser.add_argument("--concurrency", type=int, default=4, help="run threads per Interlock worker (default 4)")
        parser.add_argument("--rounds", type=int, default=3, help="rounds, alternating the backends (default 3)")
        parser.add_argument("--latency-n", type=int, default=50, help="low-load tasks per round (default 50)")
        parser.add_argument(
            "--poll", type=float, default=0.05, help="idle poll interval of both kinds of worker, s (default 0.05)"
        )
        parser.add_argument(
            "--out", default=None, help="directory for report.md and raw.json (default results/tasks_bench)"
        )

    def handle(self, *args, n, workers, concurrency, rounds, latency_n, poll, out, **options):
        from prove.bench.tasks_run import run
        from prove.bench.tasks_write import write

        for flag, value, least in (("--n", n, 1), ("--workers", workers, 1), ("--concurrency", concurrency, 1)):
            if value < least:
                raise CommandError(f"{flag} must be at least {least}, got {value}")
        if rounds < 1 or latency_n < 1 or poll <= 0:
            raise CommandError("--rounds and --latency-n must be at least 1, --poll positive")
        command = (
            f"python manage.py bench_tasks --n {n} --workers {workers} --concurrency {concurrency} "
            f"--rounds {rounds} --latency-n {latency_n} --poll {poll:g}" + (f" --out {out}" if out else "")
        )
        out_dir = Path(out) if out else DEFAULT_OUT
        report = run(n, workers, concurrency, rounds, latency_n, poll, command, self.stdout, out_dir)
        write(report, out_dir)
        c = report["comparison"]
        self.stdout.write(
            f"throughput ratio {c['throughput_ratio']} (vs db {c['db_best']}), low-load p50 ratio "
            f"{c['low_load_p50_ratio']}, target met: {c['target_met']}; wrote {out_dir}"
        )
