"""The ``approvals`` settings, each with its default; the review UI reads its settings here only.

``from approvals.conf import settings`` then ``settings.SECOND_APPROVER_CENTS`` returns the
project's ``APPROVALS_SECOND_APPROVER_CENTS`` when its Django settings define it, else the
default below (read again at each access, so ``override_settings`` applies).

===================================  ==========  ===============================================
setting                              default     what it sets
===================================  ==========  ===============================================
``APPROVALS_SECOND_APPROVER_CENTS``  ``50000``   from this amount (cents) an approval in the
                                                 review UI needs two distinct approvers before
                                                 the grant is issued
``APPROVALS_PREMISE_TIMEOUT``        ``2.0``     seconds allowed to re-read a case's premises
                                                 from its target for the review page
===================================  ==========  ===============================================
"""

from __future__ import annotations

from typing import Any

PREFIX = "APPROVALS_"
DEFAULTS: dict[str, Any] = {
    "SECOND_APPROVER_CENTS": 50_000,
    "PREMISE_TIMEOUT": 2.0,
}


class Settings:
    """``APPROVALS_*`` settings by their name without the prefix; an unknown name is AttributeError."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"{PREFIX}{name} is not an approvals setting (known: {', '.join(DEFAULTS)})")
        from django.conf import settings as django_settings

        return getattr(django_settings, PREFIX + name, DEFAULTS[name])


settings = Settings()
