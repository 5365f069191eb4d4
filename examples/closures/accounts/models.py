"""An account, and the record a closure leaves."""

from __future__ import annotations

from django.db import models


class Account(models.Model):
    """A customer account. Closing it refunds its balance and sets ``closed_at``."""

    id = models.CharField(primary_key=True, max_length=32)
    owner = models.CharField(max_length=200)
    balance_cents = models.BigIntegerField(default=0, help_text="what the bank owes the owner, in euro cents")
    open_disputes = models.PositiveIntegerField(default=0)
    closed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return f"{self.id} ({self.owner})"


class ClosureRecord(models.Model):
    """One closure, written by the target's ``apply``.

    ``idempotency_key`` is the effect id: a resend of the same effect finds this row and
    writes nothing, which is what makes the target tier 1.
    """

    idempotency_key = models.CharField(max_length=64, unique=True)
    # One closure per account, whatever the key: the database's backstop behind the premises.
    account = models.OneToOneField(Account, models.PROTECT, related_name="closure")
    refunded_cents = models.BigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.account_id} closed by {self.idempotency_key}"
