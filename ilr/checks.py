"""Django system checks of the ``ilr`` app: what the runtime needs of the project's settings."""

from __future__ import annotations

from django.core.checks import Error, register
from django.db import connections


@register("ilr")
def database_is_postgresql(app_configs=None, databases=None, **kwargs) -> list[Error]:
    """ilr.E001 unless the default database is PostgreSQL (its tables, locks, LISTEN/NOTIFY and
    SQL are PostgreSQL's; 15 or newer). Reads the backend's vendor: no connection is opened."""
    vendor = connections["default"].vendor
    if vendor == "postgresql":
        return []
    engine = connections["default"].settings_dict.get("ENGINE")
    return [Error(f"ilr needs PostgreSQL 15 or newer; DATABASES['default'] is {vendor} ({engine}).",
                  hint="Set DATABASES['default']['ENGINE'] to 'django.db.backends.postgresql' "
                       "(or a backend built on it) and point it at a PostgreSQL 15+ server.",
                  id="ilr.E001")]
