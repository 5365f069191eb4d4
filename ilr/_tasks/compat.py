"""Django's Tasks framework from Django (6.0 or newer) or from the django-tasks backport (5.2).

Both ship the same classes under two package names; the backport calls two exceptions
``...Error`` and logs on ``django_tasks`` rather than ``django.tasks`` (``LOGGER_NAME``). Importing
this module without either raises ImportError naming what to install.
"""

from __future__ import annotations

from importlib.util import find_spec

if find_spec("django.tasks"):
    from django.tasks import default_task_backend, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskContext, TaskError, TaskResult, TaskResultStatus
    from django.tasks.exceptions import InvalidTask, InvalidTaskBackend, TaskResultDoesNotExist, TaskResultMismatch
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    LOGGER_NAME = "django.tasks"
elif find_spec("django_tasks"):  # pragma: no cover - the Django 5.2 lane
    from django_tasks import default_task_backend, task, task_backends  # type: ignore[no-redef,assignment,misc,unused-ignore]
    from django_tasks.backends.base import BaseTaskBackend  # type: ignore[no-redef,assignment,misc,unused-ignore]
    from django_tasks.base import (  # type: ignore[no-redef,assignment,misc,unused-ignore]
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend  # type: ignore[no-redef,assignment,misc,unused-ignore]
    from django_tasks.exceptions import InvalidTaskError as InvalidTask  # type: ignore[no-redef,assignment,misc,unused-ignore]
    from django_tasks.exceptions import (
        TaskResultDoesNotExist,  # type: ignore[no-redef,assignment,misc,unused-ignore]
        TaskResultMismatch,  # type: ignore[no-redef,assignment,misc,unused-ignore]
    )
    from django_tasks.signals import task_enqueued, task_finished, task_started  # type: ignore[no-redef,assignment,misc,unused-ignore]
    from django_tasks.utils import normalize_json  # type: ignore[no-redef,assignment,misc,unused-ignore]

    LOGGER_NAME = "django_tasks"  # type: ignore[constant-redefinition,unused-ignore]
else:  # pragma: no cover
    raise ImportError("ilr.tasks needs Django 6.0 or newer, or on Django 5.2 the django-tasks backport")

__all__ = [
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "LOGGER_NAME",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "default_task_backend",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
