"""Django receives the SQL migrations of ilr/sql/migrations through one RunSQL subclass.

The SQL files are the source of truth (the pattern of procrastinate, a PostgreSQL job queue):
triggers, partial and unique indexes and ``unique nulls not distinct`` stay exactly as written.
"""

from __future__ import annotations

from pathlib import Path

from django.db import migrations

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"


class RunSQLFile(migrations.RunSQL):
    """Run ``ilr/sql/migrations/<name>`` forwards, and ``reverse_sql`` backwards."""

    def __init__(self, name: str, reverse_sql: str | None = None):
        self.name = name
        super().__init__(sql=(SQL_DIR / "migrations" / name).read_text(), reverse_sql=reverse_sql)

    def deconstruct(self):
        return (self.__class__.__name__, [self.name], {"reverse_sql": self.reverse_sql})
