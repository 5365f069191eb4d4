from django.contrib import admin

from accounts.models import Account, ClosureRecord


@admin.register(Account)
class AccountAdmin(admin.ModelAdmin):
    """Accounts; a closure is made by the close_account workflow, not here."""

    list_display = ("id", "owner", "balance_cents", "open_disputes", "closed_at")
    readonly_fields = ("closed_at",)


@admin.register(ClosureRecord)
class ClosureRecordAdmin(admin.ModelAdmin):
    """Closure records, written only by the target (read-only here)."""

    list_display = ("account", "refunded_cents", "idempotency_key", "created_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
