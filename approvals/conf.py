"""The ``approvals`` settings, each with its default; the review UI reads its settings here only.

``from approvals.conf import settings`` then ``settings.PREMISE_TIMEOUT`` returns the project's
``APPROVALS_PREMISE_TIMEOUT`` when its Django settings define it, else the default below (read
again at each access, so ``override_settings`` applies). The two-person rule is the runtime's
(``ILR_TWO_PERSON_CENTS``, ilr/_conf.py), so the API, the admin and this UI agree.

===================================  ==========  ===============================================
setting                              default     what it sets
===================================  ==========  ===============================================
``APPROVALS_PREMISE_TIMEOUT``        ``2.0``     seconds allowed to re-read a case's premises
                                                 from its target for the review page
===================================  ==========  ===============================================
"""

from __future__ import annotations

from typing import Any

PREFIX = "APPROVALS_"
DEFAULTS: dict[str, Any] = {
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
