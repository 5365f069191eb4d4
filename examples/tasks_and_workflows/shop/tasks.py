"""The example's Django task. It is enqueued in the transaction that creates its order
(``place_order``), so it exists exactly when the order does.

A worker that dies while the body runs is taken over and the body runs again (at least once), so
the body is idempotent: the receipt is keyed by its order.
"""

from __future__ import annotations

import os
import time

try:
    from django.tasks import task
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task  # type: ignore[no-redef]

from shop.models import Order, Receipt, TaskRun


@task(takes_context=True, max_attempts=3, backoff=1.0, timeout=120)
def send_receipt(context, order_id: int, slow: float = 0.0) -> dict:
    """ "Send" the order's receipt (a Receipt row, once); ``slow`` seconds of work first."""
    task_id = context.task_result.id
    order = Order.objects.get(pk=order_id)
    TaskRun.objects.create(order=order, task_id=task_id, pid=os.getpid())
    time.sleep(slow)
    receipt, created = Receipt.objects.get_or_create(order=order, defaults={"task_id": task_id})
    return {"order": order.pk, "email": order.email, "receipt": receipt.pk, "created": created}
