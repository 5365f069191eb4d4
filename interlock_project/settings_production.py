"""Production settings: the project's settings (interlock_project.settings) hardened for a
deployment behind HTTPS, so that ``python manage.py check --deploy`` is clean.

Use it with ``DJANGO_SETTINGS_MODULE=interlock_project.settings_production`` (docs/deploy.md).
It refuses to start, with ImproperlyConfigured naming the variable, unless the environment gives:

- ``DJANGO_SECRET_KEY``: at least 50 characters, not the development fallback (generate one with
  ``python -c "import secrets; print(secrets.token_urlsafe(64))"``); it signs sessions and CSRF
  tokens, so anyone who knows it can log in as any approver;
- ``DJANGO_ALLOWED_HOSTS``: the host names the review UI is served under, comma-separated;
- ``DATABASE_URL``: the PostgreSQL server (the embedded cluster is for development only).

Optional: ``DJANGO_CSRF_TRUSTED_ORIGINS`` (comma-separated ``https://`` origins, when a proxy
changes the host), ``DJANGO_SECURE_PROXY_SSL_HEADER=1`` (behind a TLS-terminating proxy that sets
``X-Forwarded-Proto``; only then), ``DJANGO_SSL_REDIRECT`` (default on),
``DJANGO_SESSION_HOURS`` (default 8), and the ``AXES_*`` login limits of the project's settings.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from interlock_project.settings import *  # noqa: F403 - the project's settings, hardened below
from interlock_project.settings import DEV_SECRET_KEY, env

MIN_SECRET_KEY_LENGTH = 50
"""What ``check --deploy`` (security.W009) asks of a SECRET_KEY's length."""


def _required(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ImproperlyConfigured(f"{name} must be set for interlock_project.settings_production (docs/deploy.md)")
    return value


def _secret_key() -> str:
    # Never the public development fallback, never a short or guessable one: a known key
    # forges sessions (any approver's) and CSRF tokens.
    key = _required("DJANGO_SECRET_KEY")
    if key == DEV_SECRET_KEY or key.startswith("django-insecure-"):
        raise ImproperlyConfigured("DJANGO_SECRET_KEY is the public development key: set a secret one (docs/deploy.md)")
    if len(key) < MIN_SECRET_KEY_LENGTH or len(set(key)) < 5:
        raise ImproperlyConfigured(
            f"DJANGO_SECRET_KEY must be at least {MIN_SECRET_KEY_LENGTH} random characters, got {len(key)} "
            '(python -c "import secrets; print(secrets.token_urlsafe(64))")'
        )
    return key


SECRET_KEY = _secret_key()
DEBUG = False
ALLOWED_HOSTS = [h.strip() for h in _required("DJANGO_ALLOWED_HOSTS").split(",") if h.strip()]
_required("DATABASE_URL")  # read by interlock_project.settings: no embedded cluster in production
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

# HTTPS only: redirect, a year of HSTS, cookies never over plain HTTP.
SECURE_SSL_REDIRECT = env.bool("DJANGO_SSL_REDIRECT", default=True)
if env.bool("DJANGO_SECURE_PROXY_SSL_HEADER", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_HSTS_SECONDS = 365 * 86400
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"  # nobody frames an Approve button (clickjacking)
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SECURE = True
CSRF_COOKIE_HTTPONLY = True
# An approver's session ends after a working day, and with the browser.
SESSION_COOKIE_AGE = int(env.float("DJANGO_SESSION_HOURS", default=8) * 3600)
SESSION_EXPIRE_AT_BROWSER_CLOSE = True

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
