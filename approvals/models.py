"""The approvals app's model: the holder of the app's custom permissions (approve, revoke,
reconcile, grant, cancel, resume, terminate, retire, review).

Its table, ``approvals_approval``, is never written: approvals are recorded by the runtime, in
``ilr._ops.approval_requests.approvals`` (each approver's identity and time, the two-person rule's
record) and the grant's ``granted_by``; the review UI writes through ``ilr.approval_requests``
and ``ilr.grants`` only. The model stays because Django's permissions hang on a model, and its
migration (0001_initial) created the table; a later migration may drop the table once no
deployment reads it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Approval(models.Model):
    """Kept for its Meta.permissions; the table is never written (see the module docstring:
    approvals live in ilr.approval_requests)."""

    workflow_id = models.CharField(max_length=200, db_index=True)
    payload_hash = models.CharField(max_length=64)
    amount = models.BigIntegerField(null=True, help_text="payload amount in cents, when the payload has one")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, models.SET_NULL, null=True, related_name="+")
    username = models.CharField(max_length=150, help_text="the approver's username at the time")
    expires_in = models.FloatField(null=True, blank=True, help_text="requested grant lifetime in seconds")
    grant_id = models.CharField(
        max_length=64,
        null=True,
        blank=True,
        help_text="the grant issued with this approval; empty while a second approver is due",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        default_permissions = ("view",)
        permissions = [
            ("review", "Can open the review UI (read only)"),
            ("approve", "Can approve or reject a proposed effect"),
            ("revoke", "Can revoke a grant"),
            ("reconcile", "Can reconcile an ambiguous effect"),
            ("grant", "Can create a policy grant"),
            ("cancel", "Can cancel a workflow"),
            ("resume", "Can resume a stuck workflow"),
            ("terminate", "Can terminate a workflow (no compensation)"),
            ("retire", "Can retire a deployment version"),
        ]
        constraints = [
            # The same person approving the same proposal twice is refused by the service; this
            # constraint is the backstop against two concurrent requests of one person.
            models.UniqueConstraint(
                fields=["workflow_id", "payload_hash", "username"], name="approvals_one_approval_per_person"
            ),
        ]
        ordering = ["-created_at"]

    def __str__(self):
        state = f"grant {self.grant_id}" if self.grant_id else "awaiting a second approver"
        return f"{self.workflow_id} approved by {self.username} ({state})"
