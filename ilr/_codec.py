"""Plain JSON: validation, the canonical form, and hashes (docs/protocol.md §1, §9).

Everything the runtime stores in jsonb (workflow input, step outputs, signal payloads, effect
payloads) must be plain JSON: dict with str keys, list, str, int, finite float, bool, None.
PostgreSQL's jsonb also refuses a NUL character in a string, so we refuse it first, with the
field's path in the message, before anything is written.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from ilr._errors import InvalidInput

MAX_JSON_BYTES = 1_000_000
"""Largest encoded value accepted in one jsonb field (1 MB): an oversized input is refused."""

MAX_DEPTH = 256
"""Deepest nesting of lists and objects accepted: Python's json encoder and decoder recurse
once per level and stop near 1000."""

MAX_INT_DIGITS = 4000
"""Most digits an int may have: Python refuses to read or write one past 4300 (its
int_max_str_digits), so a longer one could be stored but never read back."""
_MAX_INT = 10**MAX_INT_DIGITS

MAX_CENTS = 2**63 - 1
"""Largest amount of cents: a bigint, as ilr._ops.grants.max_cents stores it."""


def _has_lone_surrogate(text: str) -> bool:
    # A lone surrogate ("\ud800") is a str Python holds but UTF-8 (and so psycopg and PostgreSQL)
    # cannot encode; asking the encoder is the fast test, and it fails only on one.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


SURROGATE_RULE = "may not hold a lone surrogate (U+D800 to U+DFFF): it is not text UTF-8 can encode"
"""The words of the refusal of a lone surrogate, in an id, a name or plain JSON."""


def check_plain(value: Any, field: str) -> None:
    """Raise InvalidInput naming the path of the first value that is not plain JSON.

    Args:
        value: the value to check.
        field: its name in the message ("input", "output of step 'charge'").

    Raises:
        InvalidInput: NaN or Infinity, a set, bytes, a tuple, a non-str dict key, a str (value
            or key) with a NUL character or a lone surrogate, or any other non-JSON type; a
            float that PostgreSQL's jsonb would not give back as written (-0.0, or 1e16 and
            beyond, which it keeps as exact decimals: 1e+16 reads back as the int
            10000000000000000, so the payload hash and a replay would differ); an int of more
            than MAX_INT_DIGITS digits; nesting deeper than MAX_DEPTH.
    """
    stack = [(value, field, 0)]
    while stack:
        v, path, depth = stack.pop()
        if v is None or isinstance(v, bool):
            continue
        if isinstance(v, int):
            if not -_MAX_INT < v < _MAX_INT:
                raise InvalidInput(path, f"an int may have at most {MAX_INT_DIGITS} digits")
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                raise InvalidInput(path, f"{v!r} is not plain JSON (NaN and Infinity are not allowed)")
            if abs(v) >= 1e16 or (v == 0.0 and math.copysign(1.0, v) < 0):
                raise InvalidInput(
                    path,
                    f"{v!r} would not read back as written: PostgreSQL's jsonb keeps numbers "
                    "as exact decimals (-0.0 becomes 0.0, 1e+16 the int 10000000000000000); "
                    "send an int or a string",
                )
            continue
        if isinstance(v, str):
            if "\x00" in v:
                raise InvalidInput(path, "a string may not hold a NUL character (PostgreSQL jsonb refuses it)")
            if _has_lone_surrogate(v):
                raise InvalidInput(path, "a string " + SURROGATE_RULE)
            continue
        if depth >= MAX_DEPTH:
            raise InvalidInput(path, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    raise InvalidInput(path, f"object keys must be strings, got {type(k).__name__} {k!r}")
                if "\x00" in k:
                    raise InvalidInput(path, "an object key may not hold a NUL character")
                if _has_lone_surrogate(k):
                    raise InvalidInput(path, "an object key " + SURROGATE_RULE)
                stack.append((item, f"{path}.{k}", depth + 1))
            continue
        if isinstance(v, list):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(v))
            continue
        raise InvalidInput(
            path, f"{type(v).__name__} is not plain JSON (use dict, list, str, int, float, bool or None)"
        )


def is_seconds(value: Any, *, positive: bool = False, allow_infinite: bool = False) -> bool:
    """The one test of a number of seconds: an int or float (not a bool), not NaN, >= 0 (> 0 when
    ``positive``), and finite unless ``allow_infinite``. Callers raise InvalidInput naming their
    field when it is False."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        return False
    if not allow_infinite and not math.isfinite(value):
        return False
    return value > 0 if positive else value >= 0


def check_cents(value: Any, field: str) -> int:
    """``value`` as an amount of cents: a non-negative int up to MAX_CENTS (no bool).

    Raises:
        InvalidInput: naming ``field`` and the rule.
    """
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_CENTS:
        raise InvalidInput(field, f"an amount is a non-negative integer of cents up to {MAX_CENTS}, got {value!r}")
    return value


MAX_TEXT_LENGTH = 200
"""Characters in an id or a name (workflow ids, grant ids, effect ids, who acted)."""


def check_text(value: Any, field: str, rule: str = "must be a non-empty string") -> str:
    """``value`` as an id or a name: a str with something besides whitespace, at most
    MAX_TEXT_LENGTH characters, without NUL (PostgreSQL text cannot hold one) or a lone
    surrogate (UTF-8 cannot encode one).

    Args:
        rule: the words for an empty or non-str value.

    Raises:
        InvalidInput: naming ``field`` and the rule.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, rule)
    if len(value) > MAX_TEXT_LENGTH:
        raise InvalidInput(field, f"must be at most {MAX_TEXT_LENGTH} characters, got {len(value)}")
    if "\x00" in value:
        raise InvalidInput(field, "may not hold a NUL character")
    if _has_lone_surrogate(value):
        raise InvalidInput(field, SURROGATE_RULE)
    return value


def check_workflow_id(wf_id: Any, field: str = "workflow_id") -> str:
    """``wf_id`` as a workflow id (check_text).

    Raises:
        InvalidInput: naming ``field``: not a non-empty str of at most MAX_TEXT_LENGTH
        characters without NUL.
    """
    return check_text(wf_id, field)


DERIVED_ID_SEPARATORS = ("/", "#")
"""The separators of the ids the runtime derives: a child's ``<parent id>/<seq>`` and a
continue-as-new successor's ``<id>#<n>`` (``ilr._db.store.successor_id``)."""


def check_new_workflow_id(wf_id: Any, field: str = "workflow_id") -> str:
    """``wf_id`` as the id of a workflow a caller starts: check_workflow_id, and neither of
    DERIVED_ID_SEPARATORS. A started ``a#1`` or ``a/1`` would take the id the runtime gives
    ``a``'s successor or first child, whose insert would then fail; ids the runtime derived are
    still looked up, signalled and cancelled through check_workflow_id.

    Raises:
        InvalidInput: naming ``field``: check_workflow_id's rule, or a '/' or '#' in the id.
    """
    check_workflow_id(wf_id, field)
    if any(sep in wf_id for sep in DERIVED_ID_SEPARATORS):
        raise InvalidInput(
            field,
            f"may not hold '/' or '#', which the runtime reserves for the ids it derives (a child's "
            f"<parent id>/<seq>, a continue-as-new successor's <id>#<n>), got {wf_id!r}",
        )
    return wf_id


def check_who(by: Any, field: str = "by") -> str:
    """``by`` as the person or service acting (check_text with that rule).

    Raises:
        InvalidInput: naming ``field``.
    """
    return check_text(by, field, "must name the person or service acting (a non-empty string)")


def check_decision_ref(decision: Any, workflow_id: str, field: str = "decision") -> None:
    """A Decision.ref a request or an effect cites must be this workflow's own: its model and
    reasoning are shown to the approver and recorded as the decision, so a reference to another
    case's decide step would put that case's words on this one.

    Raises:
        InvalidInput: naming ``field``: a dict whose ``workflow_id`` is not ``workflow_id``.
    """
    if isinstance(decision, dict) and "workflow_id" in decision and decision["workflow_id"] != workflow_id:
        raise InvalidInput(
            field, f"must cite a decision of this workflow ({workflow_id!r}), got {decision['workflow_id']!r}"
        )


def dumps(value: Any, field: str) -> str:
    """Check ``value`` is plain JSON and encode it for a jsonb parameter.

    Raises:
        InvalidInput: not plain JSON, or over MAX_JSON_BYTES encoded.
    """
    check_plain(value, field)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    if len(text.encode()) > MAX_JSON_BYTES:
        raise InvalidInput(field, f"encoded size {len(text.encode())} bytes exceeds {MAX_JSON_BYTES}")
    return text


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# One encoder, not one per call: json.dumps builds a new encoder whenever it is given options.
canonical_string = json.encoder.encode_basestring
"""The canonical text of a str (what canonical gives for a str, faster)."""


def canonical(value: Any) -> str:
    """The canonical JSON text: sorted keys, no spaces, UTF-8 kept (docs/protocol.md §9).

    Raises:
        ValueError: NaN or an infinity (or what json.dumps refuses so: an int too long to
            convert, a circular reference). TypeError: a value that is not plain JSON, or an
            object whose keys are not all str (or all of one sortable type).
    """
    # A scalar's text directly, as json writes it: the encoder costs more to set up per call
    # than a journal entry's scalar members cost to write (issue 9).
    kind = type(value)
    if kind is str:
        return canonical_string(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    return _CANONICAL.encode(value)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def payload_hash(payload: Any) -> str:
    """sha256 of the canonical payload, to which an effect is bound (docs/protocol.md §1)."""
    return sha256_hex(canonical(payload))


def effect_id_for(request: Any) -> str:
    """``"eff_" + sha256(canonical(request))[:32]`` (docs/protocol.md §1, idempotency key)."""
    return "eff_" + sha256_hex(canonical(request))[:32]


def loads_jsonb(value: Any) -> Any:
    """A jsonb column's value as Python data, whichever connection read it.

    The transaction bodies run on the caller's connection too; Django's psycopg connection
    loads jsonb as text, ours as Python objects.
    """
    return json.loads(value) if isinstance(value, str) else value


MAX_ANSWER_BYTES = 64 * 1024
"""Bytes of a target's answer (``apply`` or ``query``) kept whole, as UTF-8 JSON: a larger one is
bounded by ``bound_answer`` before anything records it."""

ANSWER_VALUE_HEAD_CHARS = 1024
"""Characters of a bounded value's JSON text kept as its ``head``."""


def _bounded(text: str) -> dict:
    data = text.encode()
    return {
        "$bounded": {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "head": text[:ANSWER_VALUE_HEAD_CHARS],
        }
    }


def bound_answer(answer: Any) -> Any:
    """A target's answer as the runtime records it: the journal's COMMITTED entry, the step row
    and what the workflow is given (on its first run and every replay alike).

    An answer of at most MAX_ANSWER_BYTES (UTF-8 JSON) is kept as it is. A larger object keeps
    each top-level value whose JSON text is at most ANSWER_VALUE_HEAD_CHARS characters (a
    reference, a status, an amount) and replaces each larger one with ``{"$bounded": {"bytes",
    "sha256", "head"}}``: the size and SHA-256 of that value's JSON text (UTF-8, as
    ``json.dumps(value, ensure_ascii=False)`` writes it) and its first ANSWER_VALUE_HEAD_CHARS
    characters. Any other larger answer, or an object still too large, is that marker as a
    whole. A target that answers with a whole document therefore cannot grow the journal, or
    fail the step after the send, by its size (docs/protocol.md §9).
    """
    text = json.dumps(answer, ensure_ascii=False, default=str)
    if len(text.encode()) <= MAX_ANSWER_BYTES:
        return answer
    if isinstance(answer, dict):
        out = {}
        for key, value in answer.items():
            value_text = json.dumps(value, ensure_ascii=False, default=str)
            out[key] = value if len(value_text) <= ANSWER_VALUE_HEAD_CHARS else _bounded(value_text)
        if len(json.dumps(out, ensure_ascii=False, default=str).encode()) <= MAX_ANSWER_BYTES:
            return out
    return _bounded(text)
