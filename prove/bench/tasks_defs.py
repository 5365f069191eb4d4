"""The trivial task of ``manage.py bench_tasks``, once per backend: ``add`` on Interlock's alias
("default"), ``add_db`` on django-tasks-db's ("db"). Same body, no context, no I/O."""

from __future__ import annotations

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task  # type: ignore[no-redef]


@task()
def add(a: int, b: int) -> int:
    return a + b


@task(backend="db")
def add_db(a: int, b: int) -> int:
    return a + b
