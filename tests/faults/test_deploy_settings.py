"""A documented production settings module (interlock_project.settings_production,
docs/deploy.md) on which ``manage.py check --deploy`` is clean; it refuses to start without a
real SECRET_KEY, naming the variable; and the development fallback key is one ``check --deploy``
flags (issue 40, item 11 and the Must show). ``manage.py`` runs as a real subprocess."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys

import pytest
from django.conf import settings

from tests.support import ROOT

PRODUCTION = "interlock_project.settings_production"


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL", "AXES_"))}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _production_env(**over: str) -> dict:
    env = {
        "DJANGO_SETTINGS_MODULE": PRODUCTION,
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(64),
        "DJANGO_ALLOWED_HOSTS": "review.example.com",
        "DATABASE_URL": "postgres://interlock:secret@db.internal:5432/interlock",
    }
    env.update(over)
    return {k: v for k, v in env.items() if v is not None}


def test_check_deploy_is_clean_on_the_production_settings():
    out = _manage("check", "--deploy", "--fail-level", "WARNING", **_production_env())
    assert out.returncode == 0, out.stdout + out.stderr
    assert "System check identified no issues" in out.stdout, out.stdout + out.stderr


@pytest.mark.parametrize(
    "variable, value, words",
    [
        ("DJANGO_SECRET_KEY", None, "DJANGO_SECRET_KEY must be set"),
        ("DJANGO_SECRET_KEY", settings.DEV_SECRET_KEY, "DJANGO_SECRET_KEY is the public development key"),
        ("DJANGO_SECRET_KEY", "short-key", "DJANGO_SECRET_KEY must be at least 50"),
        ("DJANGO_ALLOWED_HOSTS", None, "DJANGO_ALLOWED_HOSTS must be set"),
        ("DATABASE_URL", None, "DATABASE_URL must be set"),
    ],
)
def test_the_production_settings_refuse_to_start_naming_the_variable(variable, value, words):
    out = _manage("check", **_production_env(**{variable: value}))
    assert out.returncode != 0 and words in out.stderr, out.stderr[-2000:]
    assert "ImproperlyConfigured" in out.stderr


def test_the_development_key_is_flagged_by_check_deploy():
    """The project's settings without DJANGO_SECRET_KEY fall back to a public key: check
    --deploy must say so (security.W009), not pass it."""
    out = _manage("check", "--deploy", DJANGO_SETTINGS_MODULE="interlock_project.settings")
    assert "security.W009" in out.stdout + out.stderr, out.stdout + out.stderr
