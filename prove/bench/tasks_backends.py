"""The two backends of ``manage.py bench_tasks`` as the bench reads them: the task to enqueue,
the table to empty before a measurement, and the SQL that reads each task's stamps back.

Every stamp is the backend's own, on the one machine's clock: Interlock's ``enqueued_at`` is the
workflow row's created_at (PostgreSQL now(): the start of the enqueuing transaction) and its
``finished_at`` the row's updated_at at completion (the finishing transaction's now());
django-tasks-db's are the Python clock (timezone.now()) at the row's create and at its final save.
"""

from __future__ import annotations

import dataclasses

from prove.queries import TASKS_BENCH_DONE_SQL, TASKS_BENCH_RESET_SQL, TASKS_BENCH_STAMPS_SQL


@dataclasses.dataclass(frozen=True)
class Backend:
    key: str  # "interlock" or "db"
    label: str
    task_path: str  # the Task object, by import path
    reset_sql: str
    done_sql: str  # one row: (finished, total)
    stamps_sql: str  # rows: (id, ok, enqueued_s, finished_s, runs) with ok: the right return value

    def task(self):
        from django.utils.module_loading import import_string

        return import_string(self.task_path)


INTERLOCK = Backend(
    key="interlock",
    label="Interlock (ilr.tasks.InterlockBackend, ilr_worker)",
    task_path="prove.bench.tasks_defs.add",
    reset_sql=TASKS_BENCH_RESET_SQL,
    done_sql=TASKS_BENCH_DONE_SQL,
    # runs: the attempts of the task (its failed attempts are steps, its successful one the
    # result), which must be one each.
    stamps_sql=TASKS_BENCH_STAMPS_SQL,
)

DB = Backend(
    key="db",
    label="django-tasks-db (django_tasks_db.DatabaseBackend, db_worker)",
    task_path="prove.bench.tasks_defs.add_db",
    reset_sql="truncate django_tasks_database_dbtaskresult",
    done_sql=(
        "select count(*) filter (where status in ('SUCCESSFUL', 'FAILED')), count(*) "
        "from django_tasks_database_dbtaskresult"
    ),
    # runs: the claims of the task (each claim appends the worker's id to worker_ids).
    stamps_sql=(
        "select id::text, status = 'SUCCESSFUL' and return_value = to_jsonb((args_kwargs->'args'->>0)::int "
        "+ (args_kwargs->'args'->>1)::int), extract(epoch from enqueued_at)::float8, "
        "extract(epoch from finished_at)::float8, jsonb_array_length(worker_ids) "
        "from django_tasks_database_dbtaskresult where id = any(%s::uuid[])"
    ),
)

BACKENDS = {b.key: b for b in (INTERLOCK, DB)}
