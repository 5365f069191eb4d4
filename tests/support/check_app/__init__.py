"""A Django app for tests/faults/test_settings_checks.py: its ``workflows`` module registers a target
whose action is "credit", the way a project's app registers its targets (at autodiscovery)."""
