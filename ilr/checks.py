"""Django system checks of the ``ilr`` app: what the runtime needs of the project's settings."""

from __future__ import annotations

from django.core.checks import Error, Tags, register
from django.db import connections


@register(Tags.database)
def database_is_postgresql(app_configs=None, databases=None, **kwargs) -> list[Error]:
    """ilr.E001 for each database checked (``migrate`` checks the one it migrates; ``check
    --database``) that is not PostgreSQL: the runtime's tables, locks, LISTEN/NOTIFY and SQL are
    PostgreSQL's (15 or newer). Reads the backend's vendor; no connection is opened."""
    errors = []
    for alias in databases or ():
        vendor = connections[alias].vendor
        if vendor != "postgresql":
            engine = connections[alias].settings_dict.get("ENGINE")
            errors.append(
                Error(
                    f"ilr needs PostgreSQL 15 or newer; DATABASES[{alias!r}] is {vendor} ({engine}).",
                    hint="Set its ENGINE to 'django.db.backends.postgresql' (or a backend built on it) and "
                    "point it at a PostgreSQL 15+ server.",
                    id="ilr.E001",
                )
            )
    return errors
