"""Settings of the tasks-and-workflows example: a plain Django project plus ``ilr``,
``approvals`` and its own ``shop`` app, with Django's Tasks framework on Interlock
(``TASKS`` below). No ``ILR_*`` setting: the engine runs on its defaults.

Django 6 has the Tasks framework built in; on Django 5.2 it is the django-tasks backport
(``pip install "interlock[tasks]"``) and its ``django_tasks`` app.

The database comes from the environment: ``DATABASE_URL`` (``postgresql://user:password@host:port/name``;
a Unix socket directory goes in ``?host=/path``), else libpq's own ``PG*`` variables with
``PGDATABASE`` (default ``shop``) as the name.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import django

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "shop-example-only-change-me")
DEBUG = os.environ.get("DJANGO_DEBUG") == "1"
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ilr",
    "approvals",
    "shop",
]
if django.VERSION < (6, 0):  # Django 5.2: the Tasks framework is the django-tasks backport
    INSTALLED_APPS.append("django_tasks")

# Django's Tasks framework on Interlock: each task is a durable workflow task:<queue>, enqueued
# in the caller's transaction and run by manage.py ilr_worker (docs/guides/tasks.md).
TASKS = {
    "default": {"BACKEND": "ilr.tasks.InterlockBackend", "QUEUES": ["default"]},
}

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "shopsite.urls"
WSGI_APPLICATION = "shopsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def database_from_env(environ=os.environ) -> dict:
    """The DATABASES entry from ``DATABASE_URL``, else from libpq's ``PG*`` variables."""
    url = environ.get("DATABASE_URL", "")
    if not url:
        # Empty HOST, PORT, USER and PASSWORD leave them to libpq, which reads PGHOST and the rest.
        return {"ENGINE": "django.db.backends.postgresql", "NAME": environ.get("PGDATABASE", "shop")}
    parts = urlsplit(url)
    if parts.scheme not in ("postgres", "postgresql"):
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, got scheme {parts.scheme!r}")
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parts.path.lstrip("/")) or "shop",
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        # libpq's own spelling: a socket directory cannot sit in the URL's authority.
        "HOST": query.pop("host", None) or unquote(parts.hostname or ""),
        "PORT": query.pop("port", None) or (str(parts.port) if parts.port else ""),
        "OPTIONS": query,
    }


DATABASES = {"default": database_from_env()}

LOGIN_URL = "approvals:login"
STATIC_URL = "static/"
USE_TZ = True
