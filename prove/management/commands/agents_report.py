"""``manage.py agents_report [--framework native|pydantic-ai|...|all] [--tiers 1,2,3] [--points P,...]
[--out DIR]``: the agents kill-point x tier matrix (prove.harness.agents_report), one section per
framework (demo.agent_frameworks); writes results/agents.{md,json}. Runs on a fresh database
(``ilr_agents_report``) of the configured cluster.

Exit status: 0 when no cell has a duplicate, an unapproved send, a transcript that differs after
the kill, or a first worker that was not SIGKILLed, and the invariants registry holds; 1 otherwise.
"""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run the agent kill-point x tier matrix; write results/agents.md and .json."

    def add_arguments(self, parser):
        from demo.agent_frameworks import NAMES
        from prove.harness.agents_report import POINTS, TIERS

        parser.add_argument(
            "--framework",
            default="native",
            help=f"{', '.join(NAMES)}, a comma list, or all (default native)",
        )
        parser.add_argument("--tiers", default=",".join(map(str, TIERS)), help="comma list (default 1,2,3)")
        parser.add_argument("--points", default=",".join(POINTS), help="comma list of kill points (name or name@n)")
        parser.add_argument("--out", help="directory for agents.{md,json} (default results/)")

    def handle(self, *args, framework, tiers, points, out, **options):
        from demo.agent_frameworks import drivers
        from ilr import _killpoints as killpoints
        from prove.harness.agents_report import Matrix, failed, write_results

        try:
            tier_list = [int(t) for t in tiers.split(",") if t.strip()]
            point_list = [p.strip() for p in points.split(",") if p.strip()]
            killpoints._parse(",".join(point_list))
            chosen = drivers(framework)
        except ValueError as exc:
            raise CommandError(f"--framework/--tiers/--points: {exc}", returncode=2) from None
        if not tier_list or set(tier_list) - {1, 2, 3} or not point_list:
            raise CommandError("--tiers must name tiers 1 to 3 and --points at least one kill point", returncode=2)
        try:
            report = {
                "frameworks": {d.name: Matrix(point_list, tier_list, out=self.stdout, driver=d).run() for d in chosen}
            }
        except (RuntimeError, TimeoutError) as exc:
            raise CommandError(str(exc)) from None
        path = write_results(report, " ".join(["python manage.py agents_report", *sys.argv[2:]]), out)
        self.stdout.write(f"wrote {path} and {path.with_suffix('.json')}")
        if failed(report):
            raise CommandError(
                "agents_report: a duplicate, an unapproved send, a changed transcript, a cell not "
                "killed or an invariant violation (see the report)"
            )
