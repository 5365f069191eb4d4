"""``manage.py ilr_worker --id w1 --lease-ttl 30 --concurrency 4 --poll 1.0 [--only name@version,...] [--queue q,...]``.

``--metrics-port N [--metrics-addr A]`` serves the Prometheus endpoint /metrics (ILR_TELEMETRY,
docs/guides/telemetry.md); a port taken or out of range is one CommandError line (exit 2).

SIGTERM (or Ctrl-C) stops claiming and exits 0 after in-flight work. The worker refuses to start
on a database that is not PostgreSQL (the system check's sentence, ilr.E001; exit 2, nothing
opened), while an ilr migration is pending, and exits 2 when a deployed (name, version) has a different
code hash (unless --allow-code-change) or a live worker already holds its --id (naming the id; a
worker whose predecessor with the id died starts). A bad flag (a concurrency below 1, a lease TTL or poll
that is not a positive number of seconds, a negative --max-takeovers, an empty --id, an --import
module that cannot be imported, an unknown --only pair, a --deployment-refresh that is not a
positive number of seconds) is one CommandError line naming the flag and exits 2, as argparse's
own usage errors do. ILR_POOLER = "transaction" (ilr.conf) is one line naming what needs session
pooling, and exits 2. Connection budget: concurrency + 4 (see ilr.worker). Once registered it
prints one line naming what it runs and its settings; on exit one line saying what it did (runs
claimed, takeovers among them, how they ended: ``ilr._worker.tally``), the heartbeat count (lease
renewals while runs were held) and the worst gap between renewals.
"""

from __future__ import annotations

import importlib
import signal
import sys

from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.migrations.executor import MigrationExecutor

from ilr import _codec as codec
from ilr import _registry as registry
from ilr._checks import database_is_postgresql
from ilr._effects.targets import TargetMisconfigured
from ilr._errors import CodeChanged, InvalidInput, PoolerRefused, SigningKeyUnavailable, UnknownWorkflow
from ilr._journal import keys
from ilr._worker import watchdog
from ilr._worker.worker import Worker


class Command(BaseCommand):
    help = "Run an Interlock worker: claim and run workflows until SIGTERM."

    def add_arguments(self, parser):
        parser.add_argument("--id", dest="worker_id", required=True, help="worker id written on claims")
        parser.add_argument("--lease-ttl", type=float, default=30.0, help="claim lease in seconds (default 30)")
        parser.add_argument("--concurrency", type=int, default=4, help="runs in flight at once (default 4)")
        parser.add_argument("--poll", type=float, default=1.0, help="idle poll interval in seconds (default 1.0)")
        # None, not "": an empty value (a deploy script's unset variable) is refused, not "all".
        parser.add_argument("--only", default=None, help="comma list of name@version to register (default all)")
        parser.add_argument(
            "--queue",
            default=None,
            help="comma list of queues to serve: ILR_QUEUES queues (the workflows declared in them) "
            "and Django task queues (ilr.tasks: their task:<queue> workflows); with --only, both; default all",
        )
        parser.add_argument(
            "--import", dest="imports", action="append", default=[], help="extra module defining workflows (repeatable)"
        )
        parser.add_argument("--max-takeovers", type=int, default=None, help="crash-loop guard (default 5)")
        parser.add_argument(
            "--allow-code-change",
            action="store_true",
            help="accept a changed code_sha256 for an existing (name, version)",
        )
        parser.add_argument(
            "--deployment-refresh",
            type=float,
            default=None,
            help="seconds between refreshes of this worker's ilr.worker_deployments rows "
            "(default ILR_DEPLOYMENT_REFRESH, else max(lease TTL, 5)); live for 3 periods",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help="serve the Prometheus endpoint /metrics on this port (ILR_TELEMETRY; the telemetry extra)",
        )
        parser.add_argument(
            "--metrics-addr",
            default="127.0.0.1",
            help="the address --metrics-port binds (default 127.0.0.1; 0.0.0.0 for a scraper on another host)",
        )
        parser.add_argument(
            "--no-schedules", action="store_true", help="do not tick schedules (other workers do; default: tick them)"
        )

    def handle(
        self,
        *args,
        worker_id,
        lease_ttl,
        concurrency,
        poll,
        only,
        queue,
        imports,
        max_takeovers,
        allow_code_change,
        deployment_refresh,
        no_schedules=False,
        metrics_port=None,
        metrics_addr="127.0.0.1",
        **options,
    ):
        from ilr._conf import settings

        self._check_flags(worker_id, concurrency, lease_ttl, poll, max_takeovers)
        self._refuse_other_databases()
        if deployment_refresh is None:
            deployment_refresh = settings.DEPLOYMENT_REFRESH
        if deployment_refresh is not None and not codec.is_seconds(deployment_refresh, positive=True):
            raise CommandError(
                f"--deployment-refresh: must be a positive number of seconds, got {deployment_refresh:g}", returncode=2
            )
        for module in imports:
            self._import(module)
        self._refuse_pending_migrations()
        definitions = registry.all_definitions()
        if only is not None or queue is not None:
            wanted = [item.strip() for item in (only or "").split(",") if item.strip()]
            pairs = self._task_queues(queue) if queue is not None else []
            for item in wanted:
                name, sep, version = item.partition("@")
                if not sep:
                    raise CommandError(f"--only: {item!r} must be name@version", returncode=2)
                try:
                    pairs.append(registry.get(name, version))
                except UnknownWorkflow as exc:
                    raise CommandError(f"--only: {exc}", returncode=2) from None
            if only is not None and not wanted:
                raise CommandError(f"--only: {only!r} names no name@version", returncode=2)
            definitions = pairs
        if not definitions:
            raise CommandError(
                "no workflows are registered: install an app with a workflows module or pass --import MODULE",
                returncode=2,
            )
        try:
            # A key file the settings name but that is missing or unreadable is refused here, in
            # one sentence naming the setting, not at the first journal entry (mid-effect).
            keys.signing_key()
        except SigningKeyUnavailable as exc:
            raise CommandError(str(exc), returncode=2) from None
        self._start_telemetry(metrics_port, metrics_addr)
        worker = Worker(
            worker_id,
            definitions,
            concurrency=concurrency,
            lease_ttl=lease_ttl,
            poll=poll,
            max_takeovers=max_takeovers if max_takeovers is not None else settings.MAX_TAKEOVERS,
            allow_code_change=allow_code_change,
            deployment_refresh=deployment_refresh,
            schedules=not no_schedules,
        )
        register = worker.register

        def register_then_announce() -> None:
            # The startup line follows registration (the deployments check), so a worker that
            # says it is running has passed every start-up refusal.
            register()
            pairs = ", ".join(f"{d.name}@{d.version}" for d in worker.definitions)
            self.stdout.write(
                f"ilr_worker {worker_id}: running {pairs} (concurrency {concurrency}, "
                f"lease_ttl {lease_ttl:g} s, poll {poll:g} s)"
            )
            self.stdout.flush()

        worker.register = register_then_announce
        signal.signal(signal.SIGTERM, lambda *_: worker.stop())
        signal.signal(signal.SIGINT, lambda *_: worker.stop())
        # This process runs only the runtime's work, so a send past its deadline may end it
        # (A1); nowhere else does the runtime end a process (ilr.watchdog).
        watchdog.exit_on_overrun()
        try:
            worker.run()
        except (CodeChanged, PoolerRefused, TargetMisconfigured, InvalidInput) as exc:
            # InvalidInput: register() refused an id a live worker holds (field "worker_id").
            self.stderr.write(f"ilr_worker {worker_id}: {exc}")
            sys.exit(2)
        self.stdout.write(
            f"ilr_worker {worker_id}: {worker.tally.summary()}; heartbeat: {worker.heartbeats} beats, worst gap "
            f"{worker.worst_heartbeat_gap:.3f} s (schedule {lease_ttl / 3:.3f} s)"
        )
        from ilr._telemetry import setup

        if setup.memory_spans() is not None:  # ILR_TELEMETRY spans_memory: what the bench checks it ran
            self.stdout.write(
                f"ilr_worker {worker_id}: telemetry: {len(setup.memory_spans().get_finished_spans())} spans in memory"
            )

    def _start_telemetry(self, metrics_port: int | None, metrics_addr: str) -> None:
        """ILR_TELEMETRY for this worker, and the Prometheus endpoint of --metrics-port."""
        from ilr._telemetry import prometheus, setup

        try:
            setup.configure()
            if metrics_port is not None:
                prometheus.serve(metrics_port, metrics_addr)
        except InvalidInput as exc:
            raise CommandError(
                f"--metrics-port: {exc}" if metrics_port is not None else str(exc), returncode=2
            ) from None
        except OSError as exc:
            raise CommandError(f"--metrics-port: {metrics_addr}:{metrics_port}: {exc}", returncode=2) from None

    @staticmethod
    def _task_queues(queue: str) -> list:
        """The definitions the --queue names serve: the workflows declared in each ILR_QUEUES
        queue, and each Django task queue's task:<queue> workflow (ilr.tasks)."""
        from ilr._conf import settings
        from ilr._queues import rules
        from ilr._tasks.workflow import TASK_WORKFLOW_VERSION, workflow_name

        queues = rules(settings.QUEUES)
        out = []
        for item in (q.strip() for q in queue.split(",")):
            if not item:
                continue
            found = [d for d in registry.all_definitions() if d.queue == item]
            try:
                found.append(registry.get(workflow_name(item), TASK_WORKFLOW_VERSION))
            except UnknownWorkflow:
                pass
            if not found and item not in queues:
                raise CommandError(
                    f"--queue: {item!r} is neither a queue of ILR_QUEUES nor a queue of an "
                    "ilr.tasks.InterlockBackend in TASKS",
                    returncode=2,
                )
            if not found:
                raise CommandError(
                    f"--queue: no registered workflow is declared in queue {item!r} (a worker serves the "
                    f"workflows declared with @workflow(queue={item!r}); rt.start(queue=) puts a start under "
                    "a queue's limits and rates, not in front of other workers)",
                    returncode=2,
                )
            out.extend(found)
        if not out:
            raise CommandError(f"--queue: {queue!r} names no queue", returncode=2)
        return out

    @staticmethod
    def _check_flags(
        worker_id: str, concurrency: int, lease_ttl: float, poll: float, max_takeovers: int | None
    ) -> None:
        """Refuse a bad flag with one CommandError line naming it and the rule (exit 2)."""

        def bad(flag: str, rule: str) -> CommandError:
            return CommandError(f"{flag}: {rule}", returncode=2)

        if not worker_id.strip():
            raise bad("--id", "must be a non-empty worker name (it is written on every claim)")
        if concurrency < 1:
            raise bad("--concurrency", f"must be at least 1 (runs in flight at once), got {concurrency}")
        for flag, value in (("--lease-ttl", lease_ttl), ("--poll", poll)):
            if not codec.is_seconds(value, positive=True):
                raise bad(flag, f"must be a positive number of seconds, got {value:g}")
        if max_takeovers is not None and max_takeovers < 0:
            raise bad(
                "--max-takeovers",
                f"must be 0 or more (claims that may die before the workflow is marked stuck), got {max_takeovers}",
            )

    @staticmethod
    def _import(module: str) -> None:
        """Import an --import module; a module that cannot be found is one CommandError line."""
        if not module.strip():
            raise CommandError("--import: needs a module name (a dotted path such as myapp.flows)", returncode=2)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise CommandError(f"--import {module}: cannot import it: {exc}", returncode=2) from None
        except TargetMisconfigured as exc:  # a target registered at import refused its settings
            raise CommandError(f"--import {module}: {exc}", returncode=2) from None

    def check(self, *args, **kwargs):
        """The system checks Django runs before ``handle``, after the database refusal: Django 6
        runs the model checks against every database (a JSONField's asks the backend whether it
        supports JSON), which on SQLite would create the file before ``handle`` could refuse it."""
        self._refuse_other_databases()
        return super().check(*args, **kwargs)

    @staticmethod
    def _refuse_other_databases() -> None:
        """Refuse a DATABASES["default"] that is not PostgreSQL with the system check's sentence
        (ilr.E001), before anything connects: a SQLite connection would create its file, and the
        migration check would then call the database's missing tables pending migrations."""
        errors = database_is_postgresql(databases=[DEFAULT_DB_ALIAS])
        if errors:
            raise CommandError(f"{errors[0].msg} {errors[0].hint}", returncode=2)

    @staticmethod
    def _refuse_pending_migrations() -> None:
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        pending = [migration.name for migration, backwards in plan if migration.app_label == "ilr"]
        connection.close()
        if pending:
            raise CommandError(f"ilr migrations are pending ({', '.join(pending)}): run `manage.py migrate` first")
