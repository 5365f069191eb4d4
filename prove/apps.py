from django.apps import AppConfig


class ProveConfig(AppConfig):
    name = "prove"
    verbose_name = "Prove harness"
