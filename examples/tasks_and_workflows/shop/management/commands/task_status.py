"""``manage.py task_status TASK_ID``: the task's result as JSON (from any process)."""

import json

from django.core.management.base import BaseCommand

from shop.tasks import send_receipt

try:
    from django.tasks.exceptions import TaskResultDoesNotExist
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks.exceptions import TaskResultDoesNotExist  # type: ignore[no-redef]


class Command(BaseCommand):
    help = "Print a send_receipt task's result as JSON."

    def add_arguments(self, parser):
        parser.add_argument("task_id")

    def handle(self, *args, task_id, **options):
        try:
            result = send_receipt.get_result(task_id)
        except TaskResultDoesNotExist:
            self.stdout.write(json.dumps({"task_id": task_id, "status": "does not exist"}))
            return
        self.stdout.write(
            json.dumps(
                {
                    "task_id": result.id,
                    "status": str(result.status),
                    "return_value": result.return_value if result.status == "SUCCESSFUL" else None,
                    "attempts": result.attempts,
                    "worker_ids": result.worker_ids,
                    "errors": [e.exception_class_path for e in result.errors],
                }
            )
        )
