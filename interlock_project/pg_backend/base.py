"""Django's PostgreSQL backend, starting the embedded cluster on first connection.

Used only when DATABASE_URL is unset (see interlock_project.embedded_pg). Everything else is
Django's own backend unchanged.
"""

from __future__ import annotations

from django.db.backends.postgresql import base

from interlock_project import embedded_pg


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        pgdata = self.settings_dict.get("EMBEDDED_PGDATA")
        if pgdata:
            embedded_pg.ensure_running(pgdata)
        return super().get_new_connection(conn_params)
