"""Waiting on a condition, for the harness commands (never a bare sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``predicate`` every ``interval`` seconds until it returns something truthy.

    Returns:
        the predicate's first truthy value.

    Raises:
        TimeoutError: naming ``what`` and ``timeout`` (seconds), when it stayed falsy that long.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)
