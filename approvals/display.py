"""How the review UI shows a request's values: payload keys exactly, with the keys that read alike
flagged (``Field``, ``shown_key``, ``key_skeleton``, ``labelled``), integer cents as money, and
durations in words."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Field:
    """One payload field as a person reads it.

    Attributes:
        name: the key, exactly as in the payload.
        label: the key as shown: itself, or quoted with escapes when it has whitespace at an
            end, a run of spaces, or a character that is not plain printable text (``shown_key``).
        value: the value.
        money: the value formatted as money, for the amount the rules read (else None).
        ambiguous_with: the labels of the other keys of this payload that read the same once
            case, whitespace, "_"/"-" and look-alike letters are set aside ([]: none).
    """

    name: str
    label: str
    value: Any
    money: str | None = None
    ambiguous_with: list[str] = field(default_factory=list)


def duration_words(seconds: float) -> str:
    """A duration for people: "3 minutes", "2 hours 5 minutes", "expired" when not positive."""
    if seconds <= 0:
        return "expired"
    minutes = int(seconds // 60)
    if minutes < 1:
        return f"{int(seconds)} seconds"
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} hour{'s' if hours != 1 else ''}" + (f" {minutes} minutes" if minutes else "")
    return f"{hours // 24} days"


def money(cents: Any, currency: str = "USD") -> str | None:
    """Integer cents as money ("$20.00", "EUR 20.00"); None for anything else."""
    if isinstance(cents, bool) or not isinstance(cents, int):
        return None
    sign = "-" if cents < 0 else ""
    amount = f"{abs(cents) // 100:,}.{abs(cents) % 100:02d}"
    return f"{sign}${amount}" if currency == "USD" else f"{sign}{currency} {amount}"


# Latin look-alikes of Cyrillic and Greek letters (after casefolding), and of digits, for the
# ambiguity check only: a key that differs from another by one of these reads the same.
_LOOK_ALIKES = str.maketrans(
    {
        "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
        "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "һ": "h", "ӏ": "l", "к": "k", "м": "m", "т": "t",
        "в": "b", "н": "h", "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "τ": "t",
        "υ": "u", "χ": "x", "ε": "e", "β": "b", "μ": "u", "0": "o", "1": "l", "|": "l",
        "_": None, "-": None,
    }
)  # fmt: skip


def key_skeleton(key: str) -> str:
    """What a key reads as to a person: NFKC, casefolded, without whitespace, invisible
    characters, "_" or "-", look-alike letters mapped to Latin. Two keys with one skeleton are
    ambiguous on screen."""
    text = unicodedata.normalize("NFKC", key).casefold()
    text = "".join(ch for ch in text if not ch.isspace() and unicodedata.category(ch)[0] != "C")
    return text.translate(_LOOK_ALIKES)


def shown_key(key: Any) -> str:
    """A payload key as shown: itself when it is plain (printable, no whitespace at an end, no
    run of spaces, no whitespace but spaces), else in double quotes with each such character
    escaped (``"amount "``, ``"acct\\u200b"``), so two keys never look the same."""
    key = str(key)
    plain = key and key == key.strip() and "  " not in key and all(ch.isprintable() for ch in key)
    if plain:
        return key
    escaped = "".join(
        ch if ch.isprintable() and ch not in '"\\' else (f"\\{ch}" if ch in '"\\' else f"\\u{ord(ch):04x}")
        for ch in key
    )
    return f'"{escaped}"'


def labelled(values: dict) -> list[Field]:
    """``values`` as fields keyed exactly (``shown_key``), each flagged with the keys it reads
    alike (``key_skeleton``)."""
    out = [Field(str(name), shown_key(name), value) for name, value in values.items()]
    groups: dict[str, list[Field]] = {}
    for f in out:
        groups.setdefault(key_skeleton(f.name), []).append(f)
    for same in groups.values():
        if len(same) > 1:
            for f in same:
                f.ambiguous_with = [g.label for g in same if g is not f]
    return out
