"""``manage.py soak --minutes M [--rate R] [--workers W] [--seed S] [--out DIR]``: refunds and
multi-step workflows at a steady rate under worker, target and PostgreSQL faults (prove.harness.soak);
writes results/runtime_soak.{md,json,png}. Needs the embedded PostgreSQL, on a cluster of its
own (``ILR_DATA_DIR=.data/soak``): the server is crashed and restarted under the run.

Exit status: 0 no violation, no duplicate at tiers 1 and 2, nothing stuck or unended; 1 otherwise.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise CommandError(f"--{name} must be more than 0 (got {value})", returncode=2)
    return value


class Command(BaseCommand):
    help = "Run workflows under faults for M minutes; check every invariant; write results/runtime_soak.md."

    def add_arguments(self, parser):
        parser.add_argument("--minutes", type=float, required=True, help="minutes of feed (the drain comes after)")
        parser.add_argument("--rate", type=float, default=1.0, help="workflows started per second (default 1)")
        parser.add_argument("--workers", type=int, default=3)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--lease-ttl", type=float, default=5.0)
        parser.add_argument(
            "--fault-every", type=float, default=20.0, help="mean seconds between worker and target faults (default 20)"
        )
        parser.add_argument(
            "--pg-restart-every", type=float, default=240.0, help="seconds between PostgreSQL crashes (default 240)"
        )
        parser.add_argument(
            "--check-every",
            type=float,
            default=300.0,
            help="seconds between invariant checks during the run (default 300)",
        )
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--out", help="directory for runtime_soak.{md,json,png} (default results/)")

    def handle(
        self,
        *args,
        minutes,
        rate,
        workers,
        concurrency,
        lease_ttl,
        fault_every,
        pg_restart_every,
        check_every,
        seed,
        out,
        **options,
    ):
        from prove.harness.soak import Config, Soak
        from prove.harness.soak_report import write_results

        for name, value in (
            ("minutes", minutes),
            ("rate", rate),
            ("workers", workers),
            ("concurrency", concurrency),
            ("lease-ttl", lease_ttl),
            ("fault-every", fault_every),
            ("pg-restart-every", pg_restart_every),
            ("check-every", check_every),
        ):
            _positive(name, value)
        cfg = Config(
            minutes=minutes,
            rate=rate,
            workers=workers,
            concurrency=concurrency,
            lease_ttl=lease_ttl,
            fault_every=fault_every,
            pg_restart_every=pg_restart_every,
            check_every=check_every,
            seed=seed,
        )
        try:
            report = Soak(cfg, out=self.stdout).run()
        except RuntimeError as exc:
            raise CommandError(str(exc)) from None
        command = "python manage.py soak " + " ".join(sys.argv[2:])
        self.stdout.write(f"wrote {write_results(report, command, out)}")
        bad = (
            report["violations_final"]
            or report["violations_periodic"]
            or any(report["duplicates"].values())
            or report["unended_after_drain"]
            or any(k.endswith(":stuck") for k in report["workflows"])
        )
        if bad:
            raise CommandError("soak: a violation, a duplicate, or a workflow stuck or not ended (see the report)")
