"""Queues: the ``ILR_QUEUES`` setting, its rules and their checks (docs/protocol.md §5.4).

``ILR_QUEUES = {"payouts": {"concurrency": 10, "rate": "100/m", "per_key_rate": "5/m"}}``: a
workflow of a queue (``@workflow(queue=...)`` or ``rt.start(queue=...)``) holds a slot of the
queue's key ``queue:<name>`` from its start to its end when the queue has a concurrency limit or
a rate (limit 1000 without a limit); at most ``rate`` of its workflows start per period, and at
most ``per_key_rate`` per concurrency key (a start its key's rate holds back takes the queue's
slot only at its turn: migration 0018). ``ilr_worker --queue`` picks the queues a worker
serves. A leaf module: the registry, the client and the checks import it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ilr._concurrency import MAX_LIMIT, QUEUE_KEY_PREFIX
from ilr._errors import InvalidInput

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_WORDS = {"sec": "s", "second": "s", "min": "m", "minute": "m", "hour": "h", "day": "d"}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+)\s*$")
MAX_RATE_STARTS = 1_000_000
"""The most starts a rate may allow per period."""
MAX_RATE_PERIOD = 366 * 86400.0
"""The longest rate period, in seconds (a year)."""
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


@dataclass(frozen=True)
class QueueRule:
    """One queue of ``ILR_QUEUES``: ``concurrency`` (1 to 1000, or None), ``rate`` and
    ``per_key_rate`` (starts, seconds), or None."""

    name: str
    concurrency: int | None = None
    rate: tuple[int, float] | None = None
    per_key_rate: tuple[int, float] | None = None

    @property
    def key(self) -> str:
        """The queue's concurrency key."""
        return QUEUE_KEY_PREFIX + self.name

    @property
    def slot_limit(self) -> int | None:
        """The slots of the queue's key: its concurrency, 1000 for a rated queue without one, or
        None when the queue only routes work to workers."""
        if self.concurrency is not None:
            return self.concurrency
        return MAX_LIMIT if (self.rate or self.per_key_rate) else None

    @property
    def rates(self) -> dict | None:
        """{"rate": [n, seconds], "per_key_rate": [n, seconds]} for the workflow row, or None."""
        out = {k: list(v) for k, v in (("rate", self.rate), ("per_key_rate", self.per_key_rate)) if v}
        return out or None


def parse_rate(value: Any) -> tuple[int, float]:
    """``"100/m"``, ``"5/10s"``, ``"1000/hour"``, ``"2/minutes"`` as (starts, seconds).

    Raises:
        ValueError: not "<n>/<period><unit>" with n from 1 to 1,000,000, a period of 1 second
            to 366 days, and a unit s, m, h, d (or second, minute, hour, day, sec, min, plural
            allowed).
    """
    match = _RATE.match(value) if isinstance(value, str) else None
    unit = None
    if match:
        word = match.group(3)
        unit = word if word in _UNITS else _WORDS.get(word) or _WORDS.get(word[:-1] if word.endswith("s") else "")
    rule = (
        "a rate is '<starts>/<unit>' like '100/m' or '5/10s' (units s, m, h, d or sec, min, hour, day, plurals "
        "too; a period of 1 s to "
        f"366 days; 1 to {MAX_RATE_STARTS} starts), got {value!r}"
    )
    if not match or unit is None:
        raise ValueError(rule)
    starts, period = int(match.group(1)), float(int(match.group(2) or 1) * _UNITS[unit])
    if not 1 <= starts <= MAX_RATE_STARTS or not 1 <= period <= MAX_RATE_PERIOD:
        raise ValueError(rule)
    return starts, period


def queue_problems(value: Any, setting: str = "ILR_QUEUES") -> list[tuple[str, str]]:
    """What is wrong with ``value`` as ILR_QUEUES: [(the setting or entry, the rule)]."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [(setting, f"must be None or a dict from queue name to its rule, got {type(value).__name__}")]
    out = []
    for name, rule in value.items():
        where = f"{setting}[{name!r}]"
        if not isinstance(name, str) or not _NAME.match(name):
            out.append((where, f"a queue name is 1 to 100 letters, digits or _ . : -, got {name!r}"))
            continue
        if not isinstance(rule, dict):
            out.append((where, f"must be a dict with concurrency, rate, per_key_rate, got {type(rule).__name__}"))
            continue
        for field in rule:
            if field not in ("concurrency", "rate", "per_key_rate"):
                out.append((f"{where}[{field!r}]", "is not a queue rule (concurrency, rate, per_key_rate)"))
        limit = rule.get("concurrency")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT):
            out.append((f"{where}['concurrency']", f"must be an int from 1 to {MAX_LIMIT}, got {limit!r}"))
        for field in ("rate", "per_key_rate"):
            if rule.get(field) is not None:
                try:
                    parse_rate(rule[field])
                except ValueError as exc:
                    out.append((f"{where}[{field!r}]", str(exc)))
    return out


def rules(value: Any) -> dict[str, QueueRule]:
    """The queues of ``value``, the ILR_QUEUES setting (``ilr._conf.settings.QUEUES``); a
    malformed entry is left out (``manage.py check`` names it)."""
    value = value or {}
    bad = {entry for entry, _ in queue_problems(value)}
    out = {}
    for name, rule in value.items() if isinstance(value, dict) else ():
        if any(b.startswith(f"ILR_QUEUES[{name!r}]") for b in bad):
            continue
        out[name] = QueueRule(
            name,
            rule.get("concurrency"),
            parse_rate(rule["rate"]) if rule.get("rate") else None,
            parse_rate(rule["per_key_rate"]) if rule.get("per_key_rate") else None,
        )
    return out


def rule_for(name: Any, value: Any) -> QueueRule:
    """The rule of queue ``name`` in ``value``, the ILR_QUEUES setting.

    Raises:
        InvalidInput: not a queue of ILR_QUEUES (field "queue").
    """
    known = rules(value)
    if isinstance(name, str) and isinstance(value, dict) and name in value and name not in known:
        problems = "; ".join(f"{entry}: {rule}" for entry, rule in queue_problems(value) if f"[{name!r}]" in entry)
        raise InvalidInput("queue", f"{name!r} is in ILR_QUEUES but malformed ({problems})")
    if not isinstance(name, str) or name not in known:
        listed = ", ".join(sorted(known)) or "none"
        raise InvalidInput("queue", f"{name!r} is not a queue of ILR_QUEUES (known: {listed})")
    return known[name]
