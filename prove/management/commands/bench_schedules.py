"""``manage.py bench_schedules [--schedules N] [--every S] [--seconds T] [--workers W] [--poll P]``:
N schedules ticked by W workers for T seconds (prove.bench.schedules): exactly once per tick, the
lateness of each tick's start on the database clock, and the database's cost per tick; writes
results/schedules_bench.md and .json (``--out``: another name)."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Measure schedules under load: exactly once per tick, lateness, database cost per tick."

    def add_arguments(self, parser):
        parser.add_argument("--schedules", type=int, default=1000)
        parser.add_argument("--every", type=float, default=10.0, help="seconds between ticks (default 10)")
        parser.add_argument("--seconds", type=float, default=60.0, help="the measured window (default 60)")
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--poll", type=float, default=0.2, help="the workers' poll, seconds (default 0.2)")
        parser.add_argument("--out", default="schedules_bench", help="results/<OUT>.md and .json")

    def handle(self, *args, schedules, every, seconds, workers, poll, out, **options):
        from prove.bench.schedules import run, write_results

        result = run(schedules, every, seconds, workers, poll, out=self.stdout)
        write_results(result, "python manage.py bench_schedules " + " ".join(sys.argv[2:]), out)
