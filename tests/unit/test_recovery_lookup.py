"""Recovery's lookup backoff (effects.LOOKUP_RETRY) reaches its cap and stays there. Recovery
waiting out a target it cannot read is in tests/faults/test_recovery_lookup.py.
"""

from __future__ import annotations

from ilr import RetryPolicy
from ilr._effects.effects import LOOKUP_RETRY


def test_lookup_backoff_reaches_its_cap_and_stays_there():
    """1 s doubling to 100 s without end: attempt 1025 computed 2.0 ** 1024, an OverflowError
    that failed the workflow (about 28 hours into an outage) and orphaned its effect."""
    assert [LOOKUP_RETRY.interval(n) for n in (1, 2, 7, 8)] == [1.0, 2.0, 64.0, 100.0]
    assert LOOKUP_RETRY.interval(1025) == LOOKUP_RETRY.interval(10**6) == 100.0
    assert RetryPolicy(initial=0.5, max_interval=7.0).interval(5000) == 7.0
