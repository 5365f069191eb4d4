"""``manage.py bench_restart [--waiting N] [--inflight K] [--concurrency C] [--lease-ttl L] [--poll P]``:
the time from PostgreSQL accepting connections again after a restart to every workflow
progressing (prove.bench.restart); writes results/runtime_restart.md and .json. Needs the embedded
PostgreSQL; use a cluster of its own (``ILR_DATA_DIR=.data/bench-restart``): the server is stopped
and started."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Measure how long a database restart holds workflows up (stop fast, start, time to progress)."

    def add_arguments(self, parser):
        parser.add_argument("--waiting", type=int, default=40, help="workflows sleeping on a signal (default 40)")
        parser.add_argument("--inflight", type=int, default=4, help="workflows inside a step body (default 4)")
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--lease-ttl", type=float, default=5.0)
        parser.add_argument("--poll", type=float, default=1.0)

    def handle(self, *args, waiting, inflight, concurrency, lease_ttl, poll, **options):
        from prove.bench.restart import run, write_results

        if not 0 <= inflight < concurrency or waiting < 0:
            # The in-flight runs hold their slots until after the restart; the rest need one.
            raise CommandError(
                f"--inflight ({inflight}) must be below --concurrency ({concurrency}), "
                f"and --waiting ({waiting}) at least 0"
            )
        try:
            result = run(waiting, inflight, concurrency, lease_ttl, poll, out=self.stdout)
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        write_results(result, "python manage.py bench_restart " + " ".join(sys.argv[2:]))
