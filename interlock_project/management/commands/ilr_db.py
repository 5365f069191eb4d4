"""``manage.py ilr_db start | stop | restart-immediate | reset | status``.

Controls the embedded PostgreSQL (interlock_project.embedded_pg). ``restart-immediate`` is a
real crash: ``pg_ctl stop -m immediate`` (no checkpoint; WAL replay on start), then start.
With DATABASE_URL set there is no embedded server, and only ``status`` is allowed.
"""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from interlock_project.embedded_pg import EmbeddedPostgres


class Command(BaseCommand):
    help = "Control the embedded PostgreSQL: start, stop, restart-immediate (a real crash), reset, status."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["start", "stop", "restart-immediate", "reset", "status"])

    def handle(self, *args, action, **options):
        pgdata = getattr(settings, "ILR_EMBEDDED_PGDATA", None)
        if pgdata is None:
            if action == "status":
                db = settings.DATABASES["default"]
                self.stdout.write(json.dumps({"embedded": False, "host": db.get("HOST"), "name": db.get("NAME")}))
                return
            raise CommandError(f"ilr_db {action}: DATABASE_URL is set, so there is no embedded PostgreSQL to control")
        pg = EmbeddedPostgres(pgdata)
        if action == "start":
            pg.start()
        elif action == "stop":
            pg.stop()
        elif action == "restart-immediate":
            pg.restart_immediate()
        elif action == "reset":
            pg.reset()
        self.stdout.write(json.dumps({"embedded": True, **pg.status()}))
