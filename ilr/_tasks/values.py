"""A task's arguments and return value as JSON, refused with the path of the first value that is
not (``args[1]``, ``kwargs['when']``, ``return value['items'][0]``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ilr import _codec as codec
from ilr._errors import InvalidInput

JSON_RULE = (
    "is not JSON (a task's arguments and return value are stored as JSON: pass str, int, float, "
    "bool, None, lists and dicts with str keys, e.g. an id or an ISO date string)"
)


class _NotJSON(InvalidInput, TypeError):
    """A value that is not plain JSON: an InvalidInput naming its path, and the TypeError Django's
    own backends raise there (``normalize_json``'s "Unsupported type"), so code written against
    either catches it."""


def to_json(value: Any, field: str) -> Any:
    """``value`` normalized as Django's Tasks framework does (tuples become lists, UTF-8 bytes
    strings), then checked as plain JSON.

    Raises:
        InvalidInput: naming the path of the first value that is not JSON, and the rule (also a
            TypeError).
    """
    from ilr._tasks.compat import normalize_json

    try:
        normal = normalize_json(value)
    except (TypeError, ValueError) as exc:
        path, bad = _first_unsupported(value, field) or (field, value)
        name = type(bad).__qualname__
        kind = (
            "bytes that are not UTF-8"
            if isinstance(bad, bytes)
            else f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name}"
        )
        raise _NotJSON(path, f"{kind} {JSON_RULE} ({exc})") from None
    codec.check_plain(normal, field)
    return normal


def _first_unsupported(value: Any, path: str) -> tuple[str, Any] | None:
    """The path and value of the first part of ``value`` normalize_json refuses, or None."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = _first_unsupported(key, f"{path} key {key!r}") or _first_unsupported(item, f"{path}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return path, value
        return None
    if value is None or isinstance(value, str | int | float | bool):
        return None
    if isinstance(value, Sequence):
        for index, item in enumerate(value):
            found = _first_unsupported(item, f"{path}[{index}]")
            if found:
                return found
        return None
    return path, value
