"""Settings of ``manage.py bench_tasks``: the project's, plus django-tasks-db and its TASKS alias.

Two backends of Django's Tasks framework on one PostgreSQL database: "default" is Interlock's
(``ilr.tasks.InterlockBackend``, a task is a workflow row run by ``ilr_worker``), "db" is
django-tasks-db's ``DatabaseBackend`` (a task is a row of its own table, run by ``db_worker``).
The bench's trivial tasks are in prove/bench/tasks_defs.py, one per alias.

Django's connections persist (CONN_MAX_AGE None) unless BENCH_TASKS_CONN_MAX_AGE says otherwise:
db_worker calls close_old_connections() on every loop, which under the project's CONN_MAX_AGE 0
closes its connection, so it opens a new PostgreSQL connection for every task; persistent
connections are its best case (the bench's "db_reconnect" configuration measures the other).
Interlock's workers keep their own connections either way.
"""

from __future__ import annotations

import os

from interlock_project.settings import *  # noqa: F403
from interlock_project.settings import DATABASES, INSTALLED_APPS, TASKS

INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]
TASKS = {
    **TASKS,
    "db": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]},
}

_max_age = os.environ.get("BENCH_TASKS_CONN_MAX_AGE", "")
DATABASES["default"]["CONN_MAX_AGE"] = int(_max_age) if _max_age else None
