"""RetryPolicy with Temporal's defaults (docs/protocol.md §4, steps)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """How a failing step is retried. Backoff happens by durable suspend, not by sleeping in
    the worker: a failed attempt records nothing and the workflow sleeps until the next one.
    """

    initial: float = 1.0
    """Seconds before the second attempt. Default 1s."""
    backoff: float = 2.0
    """Multiplier per attempt. Default 2.0."""
    max_interval: float | None = None
    """Cap on the interval in seconds. Default None, meaning 100 x initial."""
    max_attempts: int = 0
    """Attempts in all, the first included. Default 0, meaning unlimited."""
    non_retryable: tuple = ()
    """Exception classes, or their names, that fail the step at once. Default none."""

    def __post_init__(self):
        if self.initial < 0 or self.backoff < 1 or self.max_attempts < 0:
            raise ValueError("RetryPolicy: initial >= 0, backoff >= 1 and max_attempts >= 0 are required")

    def interval(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based):
        ``min(initial * backoff**(attempt-1), max_interval)``."""
        cap = self.max_interval if self.max_interval is not None else 100 * self.initial
        try:
            return min(self.initial * self.backoff ** (attempt - 1), cap)
        except OverflowError:  # backoff ** n past a float (attempt ~1025 at 2.0): the cap long since
            return cap

    def retries(self, exc: BaseException, attempt: int) -> bool:
        """Whether failed attempt ``attempt`` is followed by another."""
        for item in self.non_retryable:
            if (isinstance(item, str) and type(exc).__name__ == item) or (
                isinstance(item, type) and isinstance(exc, item)
            ):
                return False
        return self.max_attempts == 0 or attempt < self.max_attempts
