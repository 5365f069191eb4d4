"""``interlock_project.settings`` for a ``manage.py check`` subprocess (tests/faults/test_settings_checks.py):
the ``tests.support.check_app`` app (its workflows module registers the "credit" target), and the ILR_*
values of ``$ILR_CHECK_OVERRIDES``, a Python literal dict from setting name to value."""

from __future__ import annotations

import ast
import os

from interlock_project.settings import *  # noqa: F403 - the project's settings, then the changes
from interlock_project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "tests.support.check_app"]

for _name, _value in ast.literal_eval(os.environ.get("ILR_CHECK_OVERRIDES", "{}")).items():
    globals()[_name] = _value
