from django.apps import AppConfig


class IlrConfig(AppConfig):
    """The Interlock runtime. On ready, imports every installed app's ``workflows`` module and
    registers the ``task:<queue>`` workflows of every ``ilr.tasks.InterlockBackend`` in TASKS;
    then applies ILR_TELEMETRY (spans and metrics, ``ilr._telemetry.setup``) and registers the
    state gauges when it asks for them (``state_gauges``)."""

    name = "ilr"
    verbose_name = "Interlock runtime"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from ilr import _checks  # noqa: F401 (registers the system checks)
        from ilr._registry import autodiscover

        autodiscover()
        _register_task_queues()
        _configure_telemetry()


def _configure_telemetry() -> None:
    """ILR_TELEMETRY applied to this process (ilr._telemetry.setup); a setting of the wrong shape
    leaves telemetry off here and is named by the system check (ilr.E002)."""
    from ilr._errors import InvalidInput
    from ilr._telemetry import setup

    try:
        setup.configure()
    except InvalidInput:
        return
    from ilr._conf import settings

    options = settings.TELEMETRY or {}
    if options.get("state_gauges") and options.get("enabled") is not False:
        from ilr._telemetry.gauges import register_gauges

        # On the global provider: the API's proxy until an SDK provider is set (the worker's
        # --metrics-port sets one later); the gauges move to it then.
        register_gauges()


def _register_task_queues() -> None:
    from django.conf import settings
    from django.utils.module_loading import import_string

    for params in (getattr(settings, "TASKS", None) or {}).values():
        try:
            backend = import_string(params.get("BACKEND", ""))
        except ImportError:
            continue  # Django's own check names a backend that does not import
        if isinstance(backend, type) and getattr(backend, "registers_task_queues", False):
            from ilr.tasks import register_task_queues

            register_task_queues(params.get("QUEUES", ["default"]))
