"""The ``ilr`` settings, each with its default; the engine reads its settings here only.

``from ilr.conf import settings`` then ``settings.MAX_TAKEOVERS`` returns the project's
``ILR_MAX_TAKEOVERS`` when its Django settings define it, else the default below. Each access
reads Django's settings again, so ``override_settings`` applies. A project needs none of them.

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
                                                                           request whose payload amount is at or
                                                                           above it needs two different approvers
                                                                           (the action's entry wins)
=========================  ==============================================  ==========================================
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

PREFIX = "ILR_"
DEFAULTS: dict[str, Any] = {
    "MAX_TAKEOVERS": 5,
    "DEPLOYMENT_REFRESH": None,
    "SIGNING_KEY": None,
    "DATA_DIR": None,
    "BEFORE_CONNECT": None,
    "POOLER": None,
    "TWO_PERSON_CENTS": None,
}


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
