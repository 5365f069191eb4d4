"""``manage.py prove <subcommand>``: the Prove harness's local peers (docs/protocol.md §16.2).

Subcommands, one per peer process:

- ``target``: the local HTTP payment target (demo.peers.target; also ``manage.py demo_peer target``).
- ``proxy``: the TCP fault proxy (prove.peers.fault_proxy).
- ``model-stub``: the Anthropic Messages API stub (demo.peers.model_stub; also ``manage.py demo_peer
  model-stub``).

Each long-running subcommand prints one ready line first, ``listening 127.0.0.1:PORT`` (the
proxy adds `` control 127.0.0.1:PORT``), so a parent that asked for port 0 learns the port.
SIGTERM stops it cleanly.

Without a subcommand it runs the scenario runner (docs/protocol.md §16, prove.harness.runner):
``manage.py prove [--quick] [--scenario S01,S08a] [--tier 1,2]
[--system runtime,temporal,temporal_check,dbos] [--seeds N] [--results-dir DIR]``: every selected
(scenario, variant, tier, system) cell with n seeds (30 by default, 3 with --quick), a progress
line per run, one JSON per run under .data/prove/runs/, up to 20 failing runs per cell in
<results>/runtime_prove_failures/, and <results>/runtime_prove.md, .json and the PNG plots. It
exits 1 when a runtime cell is not correct on every run, 0 otherwise (Temporal's failures are
findings, not errors).

Adding a subcommand: write a ``Subcommand`` subclass (demo.peers.serving) with ``name``, ``help``,
``add_arguments`` and ``run``, and list it in ``SUBCOMMANDS``. The harness starts its peers as real
subprocesses through prove.peers.processes (``spawn_subcommand``, ``stop_process``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from django.core.management.base import BaseCommand, CommandError

from demo.peers.processes import MANAGE_PY
from demo.peers.serving import ModelStubSubcommand, Subcommand, TargetSubcommand, ready, serve_until_term


class ProxySubcommand(Subcommand):
    name = "proxy"
    help = "Run the TCP fault proxy (pass, delay, blackhole, reset) with an HTTP control API."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--listen-port", type=int, default=0, help="0 picks a free port")
        parser.add_argument("--upstream", required=True, help="HOST:PORT or unix:/path/to/socket")
        parser.add_argument("--control-port", type=int, default=0, help="0 picks a free port")

    def run(self, options: dict, stdout) -> None:
        from prove.peers.fault_proxy import serve

        serve(
            host=options["host"],
            listen_port=options["listen_port"],
            upstream=options["upstream"],
            control_port=options["control_port"],
            ready=lambda line: ready(stdout, line),
        )


SUBCOMMANDS: list[Subcommand] = [TargetSubcommand(), ProxySubcommand(), ModelStubSubcommand()]
"""The demo's peers (demo.peers.serving) and the harness's fault proxy."""


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


class Command(BaseCommand):
    help = (
        "The Prove harness (docs/protocol.md section 16): without a subcommand, run the "
        "scenarios and write results/runtime_prove.md; subcommands target, proxy, model-stub "
        "run one local peer."
    )
    # The peers never touch the database; skipping checks keeps start-up short and keeps a
    # peer from depending on PostgreSQL being up.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--quick", action="store_true", help="n = 3 seeds per cell (default n = 30)")
        parser.add_argument("--seeds", type=int, default=None, help="seeds per cell (overrides --quick)")
        parser.add_argument(
            "--scenario",
            type=_csv,
            default=None,
            help="comma list of scenario ids or id/variant (S01,S08a,S09/pre); default all",
        )
        parser.add_argument(
            "--tier",
            dest="tiers",
            type=lambda v: [int(x) for x in _csv(v)],
            default=None,
            help="comma list of tiers; default every tier a scenario lists",
        )
        parser.add_argument(
            "--system",
            dest="systems",
            type=_csv,
            default=None,
            help="comma list of runtime, temporal, temporal_check, dbos; default all four",
        )
        parser.add_argument(
            "--jobs",
            type=int,
            default=1,
            help="parallel lanes, each with its own database and Temporal server (default 1)",
        )
        parser.add_argument(
            "--report-from",
            type=_csv,
            default=None,
            help="rebuild the report from the runs of these sweep ids (no runs)",
        )
        parser.add_argument(
            "--first-seed", type=int, default=1, help="the first seed (default 1): a shard runs seeds K..K+N-1"
        )
        parser.add_argument(
            "--shard",
            action="store_true",
            help="also write the runs as one line each under results/prove_runs/ (a shard)",
        )
        parser.add_argument(
            "--from-shards",
            action="store_true",
            help="rebuild the report from every shard in results/prove_runs/ (no runs)",
        )
        parser.add_argument(
            "--shards-dir", default=None, help="where shards go and are read (default results/prove_runs/)"
        )
        parser.add_argument("--lane", default=None, help=argparse.SUPPRESS)
        parser.add_argument("--sweep-id", default=None, help=argparse.SUPPRESS)
        parser.add_argument(
            "--results-dir",
            default=None,
            help="where runtime_prove.md/.json, the plots and the failures go (default results/)",
        )
        subparsers = parser.add_subparsers(dest="subcommand", required=False, metavar="SUBCOMMAND")
        for sub in SUBCOMMANDS:
            sub.add_arguments(subparsers.add_parser(sub.name, help=sub.help, description=sub.help))

    def handle(self, *args, subcommand: str | None = None, **options):
        if subcommand is None:
            return self._scenarios(options)
        by_name = {sub.name: sub for sub in SUBCOMMANDS}
        if subcommand not in by_name:
            raise CommandError(f"unknown subcommand {subcommand!r}")

        serve_until_term(by_name[subcommand], options, sys.stdout)

    def _scenarios(self, options: dict) -> None:
        from prove.harness.lanes import run_lane
        from prove.harness.prove_command import run_command

        # SIGTERM unwinds like Ctrl-C, so every worker, target, proxy and Temporal server this
        # run started is stopped by the runner's cleanup paths.
        def _on_term(signum, frame):
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, _on_term)

        if options["lane"]:
            sys.exit(
                run_lane(
                    options["lane"],
                    options["seeds"] or 3,
                    options["sweep_id"],
                    self.stdout,
                    first_seed=options["first_seed"],
                )
            )

        argv = (
            ["python", "manage.py", "prove"] + sys.argv[sys.argv.index("prove") + 1 :]
            if "prove" in sys.argv
            else ["python", "manage.py", "prove"]
        )
        if os.environ.get("ILR_DATA_DIR"):
            data = os.path.relpath(os.environ["ILR_DATA_DIR"], MANAGE_PY.parent)
            argv.insert(0, f"ILR_DATA_DIR={data}")
        try:
            status = run_command(
                quick=options["quick"],
                seeds=options["seeds"],
                scenarios=options["scenario"],
                tiers=options["tiers"],
                systems=options["systems"],
                results_dir=options["results_dir"],
                command=" ".join(argv),
                out=self.stdout,
                jobs=options["jobs"],
                report_from=options["report_from"],
                first_seed=options["first_seed"],
                shard=options["shard"],
                from_shards=options["from_shards"],
                shards_dir=options["shards_dir"],
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if status:
            sys.exit(status)
