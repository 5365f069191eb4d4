"""``manage.py close_account ID``: start the close_account workflow for an account (workflow id
``close-<ID>``; a second start of the same id changes nothing); prints {"workflow_id"} as JSON."""

import json

from django.core.management.base import BaseCommand, CommandError

from accounts.models import Account
from ilr import Runtime


class Command(BaseCommand):
    help = "Start the close_account workflow for an account."

    def add_arguments(self, parser):
        parser.add_argument("account_id")

    def handle(self, *args, account_id, **options):
        if not Account.objects.filter(pk=account_id).exists():
            raise CommandError(f"no account {account_id!r} (manage.py open_account creates one)")
        rt = Runtime()
        try:
            workflow_id = rt.start("close_account", f"close-{account_id}", {"account": account_id})
        finally:
            rt.close()
        self.stdout.write(json.dumps({"workflow_id": workflow_id}))
