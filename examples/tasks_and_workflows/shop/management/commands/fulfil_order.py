"""``manage.py fulfil_order ORDER_ID``: start the ``fulfil_order`` workflow (id ``fulfil-<order>``,
idempotent on it); prints {"workflow_id"} as JSON."""

import json

from django.core.management.base import BaseCommand

from ilr import Runtime


class Command(BaseCommand):
    help = "Start the fulfil_order workflow of an order."

    def add_arguments(self, parser):
        parser.add_argument("order_id", type=int)

    def handle(self, *args, order_id, **options):
        rt = Runtime()
        try:
            wf_id = rt.start("fulfil_order", f"fulfil-{order_id}", {"id": order_id})
        finally:
            rt.close()
        self.stdout.write(json.dumps({"workflow_id": wf_id}))
