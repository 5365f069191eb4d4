"""``manage.py ilr_schedules [--import MODULE ...] [--prune]``: apply the schedules declared in
code (``ilr.declare_schedule``, beside their workflows) to the database, in one transaction:
each is created or updated (a spec left as it was keeps its next tick); ``--prune`` deletes the
code-declared schedules no longer declared. Prints one line per schedule. Bad input in a
declaration fails at import, naming the field, and writes nothing (exit 2)."""

from __future__ import annotations

import importlib

from django.core.management.base import BaseCommand, CommandError

from ilr import _db as db
from ilr._errors import InvalidInput
from ilr._schedules.declared import sync_in


class Command(BaseCommand):
    help = "Create or update the schedules declared in code (--prune: delete the ones no longer declared)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--import", dest="imports", action="append", default=[], help="module declaring schedules (repeatable)"
        )
        parser.add_argument("--prune", action="store_true", help="delete code-declared schedules no longer declared")

    def handle(self, *args, imports, prune, **options):
        try:
            for module in imports:
                importlib.import_module(module)
            with db.connect(db.conninfo(), application_name="ilr-schedules") as conn, conn.transaction():
                out = sync_in(conn, prune=prune)
        except InvalidInput as exc:
            raise CommandError(f"{exc.field}: {exc.rule}", returncode=2) from exc
        except ImportError as exc:
            raise CommandError(f"--import: {exc}", returncode=2) from exc
        for sid in out["saved"]:
            self.stdout.write(f"saved {sid}")
        for sid in out["pruned"]:
            self.stdout.write(f"pruned {sid}")
        self.stdout.write(f"{len(out['saved'])} schedule(s) declared, {len(out['pruned'])} pruned")
