"""A payload's amount: one definition for every money rule and every screen.

The amount of a payload is the integer cents under its target's ``amount_field`` (default
``"amount"``), and nothing else: the two-person rule (``ilr.approval_requests``), the cap an
approval puts on its grant (``max_cents``), the grant check at the send
(``ilr._effects.rules.lease_snapshot``, given the field) and the review UI's money and Approve
button all read it through this module, so the figure an approver is shown is the figure the
rules check. A value that is not cents (a bool, a str such as "100.00", a float, a negative
number, more than ``codec.MAX_CENTS``) is no amount.
"""

from __future__ import annotations

from typing import Any

from ilr._codec import MAX_CENTS
from ilr._errors import InvalidInput

DEFAULT_FIELD = "amount"
"""The payload key of the amount when the target names none."""


def amount_field(target_or_name: Any) -> str:
    """The payload key holding the amount of ``target_or_name``'s payloads.

    Args:
        target_or_name: an effect target, a registered target's name (looked up in
            ``ilr.targets``; an unknown name has the default), or None.

    Returns:
        the target's ``amount_field``, else ``DEFAULT_FIELD``.

    Raises:
        InvalidInput: the target declares an ``amount_field`` that is not a non-empty str.
    """
    target = target_or_name
    if isinstance(target_or_name, str):
        from ilr._effects.targets import get_target

        target = get_target(target_or_name)
    field = getattr(target, "amount_field", None) if target is not None else None
    if field is None:
        return DEFAULT_FIELD
    if not isinstance(field, str) or not field:
        raise InvalidInput(
            "amount_field", f"a target's amount_field names a payload key (a non-empty str), got {field!r}"
        )
    return field


def is_cents(value: Any) -> bool:
    """True when ``value`` is an amount of cents: an int (not a bool) in [0, MAX_CENTS]."""
    return type(value) is int and 0 <= value <= MAX_CENTS


def payload_amount(target_or_name: Any, payload: Any) -> tuple[str, int | None]:
    """The amount of ``payload`` as its target defines it.

    Args:
        target_or_name: as ``amount_field``.
        payload: the payload (anything; only a dict has an amount).

    Returns:
        (field, cents): the key read, and its value when it is cents, else None (missing, or
        not an int of cents).
    """
    field = amount_field(target_or_name)
    value = payload.get(field) if isinstance(payload, dict) else None
    return field, (value if is_cents(value) else None)
