from django.apps import AppConfig


class ShopConfig(AppConfig):
    """Orders. ``ilr`` imports this app's ``workflows`` module when Django starts; the tasks in
    ``tasks.py`` need no registration (a worker imports each by its path)."""

    name = "shop"
    default_auto_field = "django.db.models.BigAutoField"
