"""The effect target that closes an account in this project's own database."""

from __future__ import annotations

from django.db import connection, transaction

from accounts.models import Account, ClosureRecord
from ilr import TargetRejected

PREMISES = ("owner", "balance_cents", "open_disputes", "closed")
"""The facts a closure rests on, besides the account id."""


class AccountClosures:
    """Closes an account: refunds its balance and writes a ClosureRecord keyed by the effect id.

    Tier 1: ``apply`` deduplicates its idempotency key (the effect id), so a resend after a
    crash or an unknown outcome writes nothing new and answers what the first send did. It also
    answers ``query``, so recovery can look before it resends.
    """

    name = "account-closures"
    action = "close_account"  # the grant action an approval of a closure covers
    tier = 1
    queryable = True
    send_timeout = 10.0  # one short transaction in our own database
    settle_margin = 5.0
    amount_field = "amount"  # the review UI shows payload["amount"] as money in this currency
    currency = "EUR"
    reference_field = "closure"  # the receipt names the ClosureRecord that apply's answer carries

    def capture(self, account_id: str) -> dict:
        """The account's facts a closure decision rests on.

        Raises:
            Account.DoesNotExist: no such account.
        """
        a = Account.objects.get(pk=account_id)
        return {
            "account": a.id,
            "owner": a.owner,
            "balance_cents": a.balance_cents,
            "open_disputes": a.open_disputes,
            "closed": a.closed_at is not None,
        }

    def validate_premises(self, premises: dict, effect_id: str) -> list[str]:
        """One sentence per premise that no longer holds ([] when all do)."""
        if ClosureRecord.objects.filter(idempotency_key=effect_id).exists():
            # This effect's own closure changed the balance and closed the account: a resend's
            # re-check must not read that as a changed premise, or recovery would refuse to
            # resend what the target deduplicates anyway.
            return []
        try:
            now = self.capture(premises["account"])
        except Account.DoesNotExist:
            return [f"account {premises['account']} no longer exists"]
        return [
            f"{name} is {now[name]!r}, was {premises.get(name)!r}"
            for name in PREMISES
            if now[name] != premises.get(name)
        ]

    def apply(self, effect_id: str, payload: dict, timeout: float | None = None) -> dict:
        """Close the account of ``payload`` once per ``effect_id``.

        Raises:
            TargetRejected: a definite no (no such account, closed by another effect, open
                disputes, a balance other than the approved refund); nothing is written.
        """
        with transaction.atomic():
            if timeout is not None:
                # A2: the closure commits before the send's deadline or not at all.
                with connection.cursor() as cur:
                    cur.execute(
                        "select set_config('statement_timeout', %s, true)", [f"{max(1, int(timeout * 1000))}ms"]
                    )
            # The account row lock first, then the key: a concurrent resend of this effect waits
            # here and then finds the first send's record instead of a closed account.
            account = Account.objects.select_for_update().filter(pk=payload["account"]).first()
            if account is None:
                raise TargetRejected(f"no account {payload['account']}")
            existing = ClosureRecord.objects.filter(idempotency_key=effect_id).first()
            if existing is not None:
                return self._answer(existing, deduplicated=True)
            if account.closed_at is not None:
                raise TargetRejected(f"account {account.id} is already closed")
            if account.open_disputes:
                raise TargetRejected(f"account {account.id} has {account.open_disputes} open dispute(s)")
            if account.balance_cents != payload["amount"]:
                raise TargetRejected(
                    f"account {account.id} holds {account.balance_cents} cents, the closure refunds {payload['amount']}"
                )
            record = ClosureRecord.objects.create(
                idempotency_key=effect_id, account=account, refunded_cents=payload["amount"]
            )
            account.balance_cents = 0
            account.closed_at = record.created_at
            account.save(update_fields=["balance_cents", "closed_at"])
        return self._answer(record, deduplicated=False)

    def query(self, effect_id: str, payload: dict) -> dict | None:
        """What the closure under ``effect_id`` did, or None when it never landed."""
        record = ClosureRecord.objects.filter(idempotency_key=effect_id).first()
        return self._answer(record, deduplicated=True) if record is not None else None

    @staticmethod
    def _answer(record: ClosureRecord, *, deduplicated: bool) -> dict:
        return {
            "closure": record.pk,
            "account": record.account_id,
            "refunded_cents": record.refunded_cents,
            "closed_at": record.created_at.isoformat(),
            "deduplicated": deduplicated,
        }
