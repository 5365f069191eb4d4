"""The ``ilr`` settings, each with its default; the engine reads its settings here only.

``from ilr._conf import settings`` then ``settings.MAX_TAKEOVERS`` returns the project's
``ILR_MAX_TAKEOVERS`` when its Django settings define it, else the default below. Each access
reads Django's settings again, so ``override_settings`` applies. A project needs none of them.
``manage.py check`` (and every command that runs the system checks, ``ilr_worker`` included)
validates each one's shape (ilr.E002, naming the setting) and warns when a two-person rule names
no registered target and no action of one (ilr.W002).

=========================  ==============================================  ==========================================
setting                    default                                         what it sets
=========================  ==============================================  ==========================================
``ILR_MAX_TAKEOVERS``      ``5``                                           crash-loop guard: a claim that finds more
                                                                           takeovers than this marks the workflow
                                                                           stuck (``ilr_worker --max-takeovers``
                                                                           overrides it)
``ILR_DEPLOYMENT_REFRESH`` ``None``: ``max(lease_ttl, 5)`` seconds         seconds between a worker's refreshes of
                                                                           its ``ilr.worker_deployments`` rows
                                                                           (``--deployment-refresh`` overrides it)
``ILR_SIGNING_KEY``        ``None``: ``<ILR_DATA_DIR>/keys/ed25519.pem``   PEM path of the Ed25519 key that signs
                           when that file exists, else no signature        journal entries
``ILR_DATA_DIR``           ``<BASE_DIR>/.data`` when the project defines   directory of the engine's files: the
                           ``BASE_DIR``, else ``$XDG_DATA_HOME/interlock`` key pair ``manage.py ilr_keys generate``
                           (``~/.local/share/interlock``)                  writes under ``keys/``
``ILR_BEFORE_CONNECT``     ``None``                                        a callable, or its dotted path, called
                                                                           with the ``DATABASES`` entry before the
                                                                           engine opens a connection of its own
                                                                           (e.g. to start an embedded server)
``ILR_POOLER``             ``None``: direct to PostgreSQL                  the pooler between the engine and
                                                                           PostgreSQL, as the operator declares it:
                                                                           ``"session"`` (PgBouncer session mode)
                                                                           or ``"transaction"``, under which a
                                                                           worker refuses to start (it needs LISTEN
                                                                           and per-connection prepared statements)
``ILR_TWO_PERSON_CENTS``   ``None``: one approver always                   the two-person rule of approval requests:
                                                                           ``{action or target name: cents}``; a
                                                                           request whose payload amount (the
                                                                           target's ``amount_field``) is at or
                                                                           above it needs two different approvers
                                                                           (the action's entry wins)
``ILR_QUEUES``             ``None``: no queues                             ``{name: {"concurrency": n, "rate":
                                                                           "100/m", "per_key_rate": "5/m"}}``:
                                                                           queues of workflows with a global limit
                                                                           and start rates (``ilr._queues``)
``ILR_TELEMETRY``          ``None``: spans and metrics only when the       ``{"enabled", "sdk", "spans_file",
                           process has an OpenTelemetry SDK provider       "spans_memory", "metrics_memory",
                                                                           "prometheus", "service_name"}``
                                                                           (``ilr._telemetry.setup``;
                                                                           docs/guides/telemetry.md)
=========================  ==============================================  ==========================================

The history thresholds of one run (docs/protocol.md §5.7), each None (no such warning or limit)
or an int of 1 or more: ``ILR_HISTORY_WARN_STEPS`` (default 10240 step rows) and
``ILR_HISTORY_WARN_BYTES`` (10485760, 10 MiB, of step payloads): past either,
``ctx.continue_as_new_suggested`` is True and the admin and ``rt.describe`` say so;
``ILR_HISTORY_LIMIT_STEPS`` (51200): a durable call that would record step row 51201 fails the
workflow (HistoryLimitExceeded) or, when it opted in, continues it as new;
``ILR_HISTORY_LIMIT_BYTES`` (52428800, 50 MiB): the same at the first durable call once the
payloads exceed it.

``ILR_SCHEDULE_TICK_RETENTION`` (604800, 7 days; None keeps every row): seconds a schedule's tick
row is kept once its run ended (or it was skipped or missed); the workers' tick transactions
delete older ones, a batch at a time (docs/protocol.md §5.8).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ilr._codec import MAX_CENTS

PREFIX = "ILR_"
DEFAULTS: dict[str, Any] = {
    "MAX_TAKEOVERS": 5,
    "DEPLOYMENT_REFRESH": None,
    "SIGNING_KEY": None,
    "DATA_DIR": None,
    "BEFORE_CONNECT": None,
    "POOLER": None,
    "TWO_PERSON_CENTS": None,
    "QUEUES": None,
    "HISTORY_WARN_STEPS": 10_240,
    "HISTORY_WARN_BYTES": 10 * 1024 * 1024,
    "HISTORY_LIMIT_STEPS": 51_200,
    "HISTORY_LIMIT_BYTES": 50 * 1024 * 1024,
    "SCHEDULE_TICK_RETENTION": 7 * 86400,
    "TELEMETRY": None,
}
HISTORY_SETTINGS = ("HISTORY_WARN_STEPS", "HISTORY_WARN_BYTES", "HISTORY_LIMIT_STEPS", "HISTORY_LIMIT_BYTES")
"""The history thresholds (Temporal's defaults: warn at 10,240 events or 10 MB, fail at 51,200
or 50 MB), each None or an int of 1 or more."""


def _cents_problem(value: Any) -> str | None:
    if type(value) is int and 0 <= value <= MAX_CENTS:
        return None
    return f"a two-person threshold is a non-negative integer of cents (50000 for $500.00), got {value!r}"


def _path_problem(value: Any) -> str | None:
    if value is None or (isinstance(value, (str, os.PathLike)) and str(value)):
        return None
    return f"must be None or a path (a non-empty str or pathlib.Path), got {value!r}"


def setting_problems(name: str, value: Any) -> list[tuple[str, str]]:
    """What is wrong with ``value`` as the ``ILR_<name>`` setting ([] when nothing is).

    Used by the system check ilr.E002 (``manage.py check``, and every command that runs the
    checks, ``ilr_worker`` included) and by the rule that reads the setting, so a setting of the
    wrong shape is named wherever it is met, never a TypeError.

    Returns:
        (the setting, as "ILR_TWO_PERSON_CENTS['refund']" for one entry; the rule it breaks).
    """
    setting = PREFIX + name
    if name == "TWO_PERSON_CENTS":
        if value is None:
            return []
        if not isinstance(value, dict):
            return [
                (setting, f"must be None or a dict from action or target name to cents, got {type(value).__name__}")
            ]
        out = []
        for key, cents in value.items():
            if not isinstance(key, str) or not key.strip():
                out.append((setting, f"every key is an action or target name (a non-empty str), got {key!r}"))
                continue
            problem = _cents_problem(cents)
            if problem:
                out.append((f"{setting}[{key!r}]", problem))
        return out
    if name == "QUEUES":
        from ilr._queues import queue_problems

        return queue_problems(value, setting)
    if name == "TELEMETRY":
        from ilr._telemetry.options import telemetry_problems

        return telemetry_problems(value, setting)
    if name == "MAX_TAKEOVERS":
        ok = type(value) is int and value >= 0
        return [] if ok else [(setting, f"must be an int, 0 or more (takeovers before stuck), got {value!r}")]
    if name == "DEPLOYMENT_REFRESH":
        ok = value is None or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < float("inf")
        )
        return [] if ok else [(setting, f"must be None or a positive number of seconds, got {value!r}")]
    if name in HISTORY_SETTINGS:
        ok = value is None or (type(value) is int and value >= 1)
        unit = "step rows" if name.endswith("STEPS") else "bytes"
        return [] if ok else [(setting, f"must be None or an int, 1 or more ({unit}), got {value!r}")]
    if name == "SCHEDULE_TICK_RETENTION":
        ok = value is None or (
            isinstance(value, (int, float)) and not isinstance(value, bool) and 1 <= value < float("inf")
        )
        return [] if ok else [(setting, f"must be None or seconds, 1 or more, got {value!r}")]
    if name == "POOLER":
        ok = value in (None, "session", "transaction")
        return [] if ok else [(setting, f"must be None, 'session' or 'transaction', got {value!r}")]
    if name in ("SIGNING_KEY", "DATA_DIR"):
        problem = _path_problem(value)
        return [(setting, problem)] if problem else []
    if name == "BEFORE_CONNECT":
        ok = value is None or callable(value) or (isinstance(value, str) and "." in value.strip(". "))
        return [] if ok else [(setting, f"must be None, a callable or its dotted path, got {value!r}")]
    return []


class Settings:
    """``ILR_*`` settings by their name without the prefix; an unknown name is AttributeError."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"{PREFIX}{name} is not an ilr setting (known: {', '.join(DEFAULTS)})")
        from django.conf import settings as django_settings

        return getattr(django_settings, PREFIX + name, DEFAULTS[name])

    @property
    def DATA_DIR(self) -> Path:  # noqa: N802 - named as the setting
        from django.conf import settings as django_settings

        configured = getattr(django_settings, "ILR_DATA_DIR", None)
        if configured:
            return Path(configured)
        base = getattr(django_settings, "BASE_DIR", None)
        if base:
            return Path(base) / ".data"
        return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "interlock"


settings = Settings()
