from django.apps import AppConfig


class IlrConfig(AppConfig):
    """The Interlock runtime. On ready, imports every installed app's ``workflows`` module."""

    name = "ilr"
    verbose_name = "Interlock runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from ilr import _checks  # noqa: F401 (registers the system checks)
        from ilr._registry import autodiscover

        autodiscover()
