"""``manage.py ilr_worker --id w1 --lease-ttl 30 --concurrency 4 --poll 1.0 [--only name@version,...]``.

SIGTERM (or Ctrl-C) stops claiming and exits 0 after in-flight work. The worker refuses to start
while an ilr migration is pending, and exits 2 when a deployed (name, version) has a different
code hash (unless --allow-code-change). Connection budget: concurrency + 3 (see ilr.worker).
On exit it prints one line with the heartbeat count and the worst gap between renewals.
"""

from __future__ import annotations

import importlib
import signal
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ilr import registry
from ilr.errors import UnknownWorkflow
from ilr.targets import TargetMisconfigured
from ilr.worker import CodeChanged, Worker


class Command(BaseCommand):
    help = "Run an Interlock worker: claim and run workflows until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--id", dest="worker_id", required=True, help="worker id written on claims")
        parser.add_argument("--lease-ttl", type=float, default=30.0, help="claim lease in seconds (default 30)")
        parser.add_argument("--concurrency", type=int, default=4, help="runs in flight at once (default 4)")
        parser.add_argument("--poll", type=float, default=1.0, help="idle poll interval in seconds (default 1.0)")
        parser.add_argument("--only", default="", help="comma list of name@version to register (default all)")
        parser.add_argument("--import", dest="imports", action="append", default=[],
                            help="extra module defining workflows (repeatable)")
        parser.add_argument("--max-takeovers", type=int, default=None, help="crash-loop guard (default 5)")
        parser.add_argument("--allow-code-change", action="store_true",
                            help="accept a changed code_sha256 for an existing (name, version)")

    def handle(self, *args, worker_id, lease_ttl, concurrency, poll, only, imports, max_takeovers,
               allow_code_change, **options):
        from django.conf import settings

        self._refuse_pending_migrations()
        for module in imports:
            importlib.import_module(module)
        definitions = registry.all_definitions()
        if only:
            wanted = [item.strip() for item in only.split(",") if item.strip()]
            pairs = []
            for item in wanted:
                name, sep, version = item.partition("@")
                if not sep:
                    raise CommandError(f"--only: {item!r} must be name@version")
                try:
                    pairs.append(registry.get(name, version))
                except UnknownWorkflow as exc:
                    raise CommandError(f"--only: {exc}") from None
            definitions = pairs
        worker = Worker(
            worker_id, definitions, concurrency=concurrency, lease_ttl=lease_ttl, poll=poll,
            max_takeovers=max_takeovers if max_takeovers is not None else settings.ILR_MAX_TAKEOVERS,
            allow_code_change=allow_code_change,
        )
        signal.signal(signal.SIGTERM, lambda *_: worker.stop())
        signal.signal(signal.SIGINT, lambda *_: worker.stop())
        try:
            worker.run()
        except (CodeChanged, TargetMisconfigured) as exc:
            self.stderr.write(f"ilr_worker {worker_id}: {exc}")
            sys.exit(2)
        self.stdout.write(f"ilr_worker {worker_id}: heartbeat: {worker.heartbeats} beats, worst gap "
                          f"{worker.worst_heartbeat_gap:.3f} s (schedule {lease_ttl / 3:.3f} s)")

    @staticmethod
    def _refuse_pending_migrations() -> None:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        pending = [migration.name for migration, backwards in plan if migration.app_label == "ilr"]
        connection.close()
        if pending:
            raise CommandError(f"ilr migrations are pending ({', '.join(pending)}): run `manage.py migrate` first")
