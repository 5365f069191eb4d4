"""``manage.py open_account ID --owner NAME [--balance-cents N] [--disputes N]``: create or update
an account (the example's seed data); prints it as JSON."""

import json

from django.core.management.base import BaseCommand

from accounts.models import Account


class Command(BaseCommand):
    help = "Create or update an account; prints it as JSON."

    def add_arguments(self, parser):
        parser.add_argument("account_id")
        parser.add_argument("--owner", required=True)
        parser.add_argument("--balance-cents", type=int, default=0)
        parser.add_argument("--disputes", type=int, default=0)

    def handle(self, *args, account_id, owner, balance_cents, disputes, **options):
        account, _ = Account.objects.update_or_create(
            pk=account_id, defaults={"owner": owner, "balance_cents": balance_cents, "open_disputes": disputes}
        )
        self.stdout.write(
            json.dumps(
                {
                    "account": account.pk,
                    "owner": account.owner,
                    "balance_cents": account.balance_cents,
                    "open_disputes": account.open_disputes,
                    "closed_at": account.closed_at.isoformat() if account.closed_at else None,
                }
            )
        )
