"""Settings for the Interlock project, read from the environment through django-environ.

Database: DATABASE_URL when set (PostgreSQL 15 or newer); otherwise the embedded PostgreSQL 18
of interlock_project.embedded_pg under ILR_DATA_DIR/pg (default .data/pg), started on first use.
ILR_DB_NAME overrides the database name in either case (test workers use it to reach the test
database).
"""

from __future__ import annotations

from pathlib import Path

import django
import environ

BASE_DIR = Path(__file__).resolve().parent.parent
env = environ.Env()
if (BASE_DIR / ".env").exists():
    environ.Env.read_env(BASE_DIR / ".env")

DATA_DIR = Path(env("ILR_DATA_DIR", default=str(BASE_DIR / ".data"))).resolve()

DEV_SECRET_KEY = "django-insecure-development-only-key-public-in-the-repository-never-deploy"
"""The fallback SECRET_KEY of development and tests: public, so its "django-insecure-" prefix
makes ``check --deploy`` flag it (security.W009), and settings_production refuses it."""
SECRET_KEY = env("DJANGO_SECRET_KEY", default=DEV_SECRET_KEY)
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "testserver"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "ilr",
    "approvals",
    "demo",  # the refund demo (manage.py demo) and its local peers; repository-only
    "prove",  # the Prove harness (manage.py prove, bench, soak, failover); repository-only
    "interlock_project",  # its ilr_db command controls the embedded PostgreSQL
    "axes",  # login rate limit (django-axes): see AXES_* below
]
if django.VERSION < (6, 0):  # Django's Tasks framework from the django-tasks backport (ilr.tasks)
    INSTALLED_APPS.append("django_tasks")

# Django's Tasks framework on Interlock (ilr.tasks): a task is a durable workflow task:<queue>,
# run by manage.py ilr_worker (--queue picks the queues a worker serves).
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
    # Last, as django-axes asks: it turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

# django-axes first: it refuses a locked-out login before the password is checked.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Login rate limit of the review UI and the admin (one login backend): after AXES_FAILURE_LIMIT
# failed logins of one username from one address, that pair is locked out for AXES_COOLOFF_TIME
# hours (HTTP 429); a success resets the count. `manage.py axes_reset` unlocks every pair.
AXES_FAILURE_LIMIT = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = env.float("AXES_COOLOFF_HOURS", default=1.0)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
# Behind a reverse proxy, set AXES_IPWARE_PROXY_COUNT and AXES_IPWARE_META_PRECEDENCE_ORDER so the
# client's address (not the proxy's) is counted (django-axes' documentation, "Configuration").

ROOT_URLCONF = "interlock_project.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

WSGI_APPLICATION = "interlock_project.wsgi.application"

if env("DATABASE_URL", default=""):
    DATABASES = {"default": env.db("DATABASE_URL")}
    ILR_EMBEDDED_PGDATA = None
else:
    from interlock_project.embedded_pg import EmbeddedPostgres

    ILR_EMBEDDED_PGDATA = DATA_DIR / "pg"
    DATABASES = {"default": EmbeddedPostgres(ILR_EMBEDDED_PGDATA).django_database()}
    # The engine's own connections start the embedded cluster too, as Django's do (pg_backend).
    ILR_BEFORE_CONNECT = "interlock_project.embedded_pg.before_connect"
if env("ILR_DB_NAME", default=""):
    DATABASES["default"]["NAME"] = env("ILR_DB_NAME")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"ilr": {"handlers": ["console"], "level": env("ILR_LOG_LEVEL", default="WARNING")}},
}

# --- Interlock runtime (every ILR_* setting and its default: ilr/_conf.py) ------------------------
# The engine's files (the signing key pair under keys/).
ILR_DATA_DIR = DATA_DIR

# Crash-loop guard (docs/protocol.md §3.4): a claim finding more takeovers than this marks the
# workflow stuck instead of running it again.
ILR_MAX_TAKEOVERS = env.int("ILR_MAX_TAKEOVERS", default=5)

# Queues of workflows (docs/guides/concurrency.md): {name: {"concurrency": n, "rate": "100/m",
# "per_key_rate": "5/m"}}, as JSON in the environment; None: no queues.
ILR_QUEUES = env.json("ILR_QUEUES", default=None)

# Seconds between a worker's refreshes of its ilr.worker_deployments rows (which live worker
# serves each version); None: max(lease_ttl, 5 s). `ilr_worker --deployment-refresh` overrides.
ILR_DEPLOYMENT_REFRESH = env.float("ILR_DEPLOYMENT_REFRESH", default=None)

# The pooler between the engine and PostgreSQL, when there is one: "session" or "transaction"
# (PgBouncer's pool_mode). A worker refuses to start under "transaction" (docs/guides/operating.md,
# "Through PgBouncer").
ILR_POOLER = env("ILR_POOLER", default=None)
if ILR_POOLER == "transaction":
    # A server-side cursor outlives the transaction PgBouncer pins the server connection for.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True

# A run's history thresholds (docs/protocol.md §5.7): warn (continue-as-new suggested) and fail
# past these many step rows or bytes of step payloads; Temporal's defaults.
ILR_HISTORY_WARN_STEPS = env.int("ILR_HISTORY_WARN_STEPS", default=10_240)
ILR_HISTORY_WARN_BYTES = env.int("ILR_HISTORY_WARN_BYTES", default=10 * 1024 * 1024)
ILR_HISTORY_LIMIT_STEPS = env.int("ILR_HISTORY_LIMIT_STEPS", default=51_200)
ILR_HISTORY_LIMIT_BYTES = env.int("ILR_HISTORY_LIMIT_BYTES", default=50 * 1024 * 1024)

# Ed25519 key that signs journal entries (docs/protocol.md §9): a PEM path. Default: the key that
# `manage.py ilr_keys generate` writes under ILR_DATA_DIR/keys, when present.
ILR_SIGNING_KEY = env("ILR_SIGNING_KEY", default=None)

# The two-person rule of approval requests (ilr/_conf.py): from this amount (cents) a refund
# needs two different approvers before the grant is issued.
ILR_TWO_PERSON_CENTS = {"refund": env.int("ILR_TWO_PERSON_REFUND_CENTS", default=50_000)}

# Spans and metrics (docs/guides/telemetry.md): ILR_TELEMETRY as JSON in the environment, e.g.
# {"spans_file": "/tmp/spans.jsonl"} or {"prometheus": true}; None: telemetry only when the process
# has an OpenTelemetry SDK provider of its own.
ILR_TELEMETRY = env.json("ILR_TELEMETRY", default=None)

# --- Approvals (the review UI, /review/; every APPROVALS_* setting: approvals/conf.py) ---------
LOGIN_URL = "approvals:login"
