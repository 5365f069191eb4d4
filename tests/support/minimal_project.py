"""The settings module of a new user's Django project: the contrib apps, ``ilr`` and
``approvals``, and nothing of this repository's own settings (no ``ILR_*``, no DATA_DIR, no
DEFAULT_AUTO_FIELD)."""

from __future__ import annotations

import textwrap
from pathlib import Path

SETTINGS = """
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "a-new-users-project"
INSTALLED_APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
                  "ilr", "approvals"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware",
              "django.contrib.messages.middleware.MessageMiddleware"]
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
              "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                 "django.contrib.auth.context_processors.auth",
                                                 "django.contrib.messages.context_processors.messages"]}}]
STATIC_URL = "static/"
USE_TZ = True
"""


def write_settings(directory: Path, name: str, database: dict | None = None) -> Path:
    """Write ``<directory>/<name>.py``; ``database`` becomes DATABASES["default"] (none: no database)."""
    text = textwrap.dedent(SETTINGS)
    if database is not None:
        text += f"DATABASES = {{'default': {database!r}}}\n"
    path = directory / f"{name}.py"
    path.write_text(text)
    return path
