"""``manage.py place_order EMAIL [--slow S] [--rollback]``: create an order and enqueue its
``send_receipt`` task in one transaction; prints {"order", "task_id", "committed"} as JSON.
``--rollback`` rolls the transaction back: neither the order nor the task exists afterwards."""

import json

from django.core.management.base import BaseCommand
from django.db import transaction

from shop.models import Order
from shop.tasks import send_receipt


class Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Create an order and enqueue its receipt task in the same transaction."

    def add_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--slow", type=float, default=0.0, help="seconds the task works (to kill its worker)")
        parser.add_argument("--rollback", action="store_true", help="roll the transaction back at the end")

    def handle(self, *args, email, slow, rollback, **options):
        out = {}
        try:
            with transaction.atomic():
                order = Order.objects.create(email=email)
                result = send_receipt.enqueue(order.pk, slow=slow)
                out = {"order": order.pk, "task_id": result.id, "status": result.status}
                if rollback:
                    raise Rollback
        except Rollback:
            out["committed"] = False
        else:
            out["committed"] = True
        self.stdout.write(json.dumps(out))
