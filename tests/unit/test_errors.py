"""One error module: every error the apps raise on purpose is an InterlockError defined in
ilr/_errors.py, with a stable code of its own; the old import paths still work."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import ilr
import ilr._errors
from ilr._errors import InterlockError

APPS = ("ilr", "approvals")


def _modules():
    for app in APPS:
        package = importlib.import_module(app)
        for info in pkgutil.walk_packages(package.__path__, f"{app}."):
            if ".migrations" in info.name or info.name.endswith(".tests"):
                continue
            yield importlib.import_module(info.name)


def test_every_public_error_is_an_interlock_error_defined_in_ilr_errors():
    stray = []
    for module in _modules():
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Exception)
                and obj.__module__ == module.__name__
                and not name.startswith("_")
                and module.__name__ != "ilr._errors"
            ):
                stray.append(f"{module.__name__}.{name}")
    assert stray == [], f"errors defined outside ilr/_errors.py: {stray}"
    outside = [
        name
        for name, obj in vars(ilr._errors).items()
        if inspect.isclass(obj) and issubclass(obj, Exception) and not issubclass(obj, InterlockError)
    ]
    assert outside == [], f"errors in ilr/_errors.py that are not an InterlockError: {outside}"


def test_every_error_has_a_code_of_its_own():
    errors = [obj for obj in vars(ilr._errors).values() if inspect.isclass(obj) and issubclass(obj, InterlockError)]
    codes = {}
    for cls in errors:
        assert "code" in vars(cls), f"{cls.__name__} inherits its code instead of having one"
        assert re.fullmatch(r"ILR-\d{3}", cls.code), (cls.__name__, cls.code)
        assert cls.code not in codes, f"{cls.__name__} and {codes.get(cls.code)} share {cls.code}"
        codes[cls.code] = cls.__name__
    assert len(codes) >= 26


def test_the_old_import_paths_still_name_the_same_classes():
    from approvals.services import ActionRefused, DeploymentNotFound
    from ilr._agents import ToolError
    from ilr._context.context import ChildFailed
    from ilr._effects.effects import EffectRefused, LookupFailed
    from ilr._worker.worker import CodeChanged

    for cls in (ActionRefused, DeploymentNotFound, ToolError, ChildFailed, EffectRefused, LookupFailed, CodeChanged):
        assert getattr(ilr._errors, cls.__name__) is cls
