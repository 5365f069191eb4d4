"""Concurrency keys: the ``Concurrency`` rule a workflow declares and the checks on a start's
key, limit and conflict policy (docs/protocol.md §5.4). A leaf module: the registry and the
client import it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ilr._errors import InvalidInput

ON_CONFLICT = ("queue", "reject", "cancel_running", "replace_queued")
"""What a start does when its key is full: queue (wait FIFO, by priority then start time),
reject (raise ConcurrencyLimitReached), cancel_running (when the key is full, request cancellation
of the holders and end the key's queued starts, then queue: the newest start wins), replace_queued
(end the queued starts of the key, cancelled, then queue)."""

MAX_KEY_LENGTH = 200
"""Characters in a concurrency key."""

MAX_LIMIT = 1000
"""The largest slot count of one key."""

QUEUE_KEY_PREFIX = "queue:"
"""The prefix of a queue's concurrency key (``ilr._queues``); user keys may not start with it."""


@dataclass(frozen=True)
class Concurrency:
    """A workflow's concurrency rule: at most ``limit`` runs per key at once.

    Args:
        key: the key, or a function of the workflow input that returns it (a str of 1 to 200
            characters, or None for no key). Runs at each start, in the process that starts.
        limit: slots per key, 1 to 1000. Default 1 (one at a time).
        on_conflict: one of ON_CONFLICT. Default "queue".

    Raises:
        InvalidInput: a limit or on_conflict out of range (fields "limit", "on_conflict").
    """

    key: Callable[[Any], str | None] | str
    limit: int = 1
    on_conflict: str = "queue"

    def __post_init__(self) -> None:
        check_limit(self.limit)
        check_on_conflict(self.on_conflict)
        if not callable(self.key):
            check_key(self.key)

    def key_for(self, input: Any) -> str | None:
        """The key of a start with ``input``; None when the function returns None.

        Raises:
            InvalidInput: the function returned something other than a key or None, or raised.
        """
        if not callable(self.key):
            return self.key
        try:
            key = self.key(input)
        except Exception as exc:
            raise InvalidInput(
                "concurrency_key", f"the workflow's key function raised {type(exc).__name__}: {exc}"
            ) from exc
        if key is None:
            return None
        try:
            return check_key(key)
        except InvalidInput as exc:
            # Name the function: the start passed no key, so "concurrency_key" alone points nowhere.
            rule = f"the workflow's key function returned {key!r:.80}: {exc.rule}"
            raise InvalidInput("concurrency_key", rule) from None


def check_key(key: Any, field: str = "concurrency_key", *, queue_keys: bool = False) -> str:
    """``key`` when it is a str of 1 to MAX_KEY_LENGTH characters, not a queue's key
    ("queue:<name>") unless ``queue_keys`` (a read may name one); else InvalidInput naming
    ``field``."""
    if not isinstance(key, str):
        raise InvalidInput(field, f"must be a str, got {type(key).__name__}")
    if not key or len(key) > MAX_KEY_LENGTH:
        raise InvalidInput(field, f"must be 1 to {MAX_KEY_LENGTH} characters, got {len(key)}")
    if key.startswith(QUEUE_KEY_PREFIX) and not queue_keys:
        raise InvalidInput(field, f"keys starting with {QUEUE_KEY_PREFIX!r} are the queues' own, got {key!r}")
    return key


def check_limit(limit: Any, field: str = "limit") -> int:
    """``limit`` when it is an int from 1 to MAX_LIMIT; else InvalidInput naming ``field``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(field, f"must be an int from 1 to {MAX_LIMIT}, got {limit!r}")
    return limit


def check_on_conflict(on_conflict: Any) -> str:
    """``on_conflict`` when it is one of ON_CONFLICT; else InvalidInput naming it."""
    if on_conflict not in ON_CONFLICT:
        raise InvalidInput("on_conflict", f"must be one of {', '.join(ON_CONFLICT)}, got {on_conflict!r}")
    return on_conflict
