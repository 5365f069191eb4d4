from django.apps import AppConfig


class AccountsConfig(AppConfig):
    """Customer accounts. ``ilr`` imports this app's ``workflows`` module when Django starts."""

    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"
