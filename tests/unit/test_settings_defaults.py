"""A Django project that defines none of the ``ILR_*`` settings (nor this repository's DATA_DIR)
runs the engine on documented defaults (ilr.conf, approvals.conf), keeps its keys under the
default data directory, and is told ilr needs PostgreSQL when it is on SQLite. The ``payouts.py``
example of docs/guides/targets.md, run as a new user would, is in
tests/faults/test_settings_defaults.py."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.conf import settings
from django.test import override_settings

from tests.support import ROOT
from tests.support.minimal_project import write_settings

UNSET = (
    "ILR_MAX_TAKEOVERS",
    "ILR_DEPLOYMENT_REFRESH",
    "ILR_SIGNING_KEY",
    "ILR_DATA_DIR",
    "ILR_BEFORE_CONNECT",
    "DATA_DIR",
    "BASE_DIR",
    "ILR_TWO_PERSON_CENTS",
    "APPROVALS_PREMISE_TIMEOUT",
)


@pytest.fixture
def bare_settings():
    """Django settings without any of UNSET, for the duration of the test."""
    with override_settings():
        for name in UNSET:
            if hasattr(settings, name):
                delattr(settings, name)
        yield settings


def test_every_setting_has_its_default(bare_settings, tmp_path, monkeypatch):
    from approvals.conf import settings as approvals_settings
    from ilr._conf import settings as ilr_settings

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert ilr_settings.MAX_TAKEOVERS == 5
    assert ilr_settings.DEPLOYMENT_REFRESH is None
    assert ilr_settings.SIGNING_KEY is None
    assert ilr_settings.BEFORE_CONNECT is None
    assert ilr_settings.DATA_DIR == tmp_path / "xdg" / "interlock"
    assert ilr_settings.TWO_PERSON_CENTS is None
    assert approvals_settings.PREMISE_TIMEOUT == 2.0
    with override_settings(BASE_DIR=tmp_path / "proj"):
        assert ilr_settings.DATA_DIR == tmp_path / "proj" / ".data"
    with override_settings(ILR_DATA_DIR=str(tmp_path / "d"), ILR_MAX_TAKEOVERS=9, APPROVALS_PREMISE_TIMEOUT=0.5):
        assert ilr_settings.DATA_DIR == tmp_path / "d"
        assert ilr_settings.MAX_TAKEOVERS == 9
        assert approvals_settings.PREMISE_TIMEOUT == 0.5
    with pytest.raises(AttributeError, match="ILR_NO_SUCH"):
        _ = ilr_settings.NO_SUCH


def test_keys_live_under_the_default_data_dir(bare_settings, tmp_path):
    from ilr._journal import keys

    with override_settings(BASE_DIR=tmp_path):
        assert keys.default_dir() == tmp_path / ".data" / "keys"
        assert keys.key_path() is None
        private, _ = keys.generate()
        try:
            assert private == tmp_path / ".data" / "keys" / "ed25519.pem"
            assert keys.key_path() == private
        finally:
            keys.signing_key.cache_clear()


def test_a_project_on_sqlite_is_told_ilr_needs_postgresql(tmp_path):
    """migrate on SQLite stops at the system check, naming the setting, before any SQL runs."""
    project = tmp_path / "project"
    project.mkdir()
    write_settings(
        project, "sqlite_settings", {"ENGINE": "django.db.backends.sqlite3", "NAME": str(tmp_path / "db.sqlite3")}
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("DATABASE_URL", "ILR_DATA_DIR")}
    env.update({"DJANGO_SETTINGS_MODULE": "sqlite_settings", "PYTHONPATH": f"{project}:{ROOT}"})
    proc = subprocess.run(
        [sys.executable, "-m", "django", "migrate"], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode != 0
    assert "ilr.E001" in proc.stderr and "ilr needs PostgreSQL 15 or newer" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / "db.sqlite3").exists() or (tmp_path / "db.sqlite3").stat().st_size == 0
