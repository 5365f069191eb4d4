"""Template filters of the review UI: money, JSON and hashes for people."""

from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def cents(value) -> str:
    """Format an amount in cents as dollars: 2000 -> "$20.00"; anything else unchanged."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "" if value is None else str(value)
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value) // 100:,}.{abs(value) % 100:02d}"


@register.filter
def as_json(value) -> str:
    """Compact JSON with sorted keys, for payloads and premise values."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


@register.filter
def pretty_json(value) -> str:
    """Indented JSON with sorted keys."""
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        return str(value)


@register.filter
def short(value, length: int = 12) -> str:
    """The first ``length`` characters of a hash or id, for display."""
    text = "" if value is None else str(value)
    return text if len(text) <= int(length) else text[: int(length)] + "…"


@register.filter
def premise_value(value) -> str:
    """A premise value in words: yes/no for booleans, JSON otherwise."""
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return as_json(value)
