"""Template filters of the review UI: money, timestamps, JSON, hashes and untrusted text for people."""

from __future__ import annotations

import datetime as dt
import json
import re
import unicodedata

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from ilr import APPROVAL_REQUEST_SIGNAL_PREFIX

register = template.Library()


@register.filter
def cents(value) -> str:
    """Format an amount in cents as dollars: 2000 -> "$20.00"; anything else unchanged."""
    if isinstance(value, bool) or not isinstance(value, int):
        return "" if value is None else str(value)
    sign = "-" if value < 0 else ""
    return f"{sign}${abs(value) // 100:,}.{abs(value) % 100:02d}"


TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S UTC"
"""The one timestamp format of the review UI (UTC, to the second)."""


def _as_datetime(value) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return dt.datetime.fromtimestamp(value, dt.UTC)
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return None


@register.filter
def when(value) -> str:
    """A timestamp in the UI's one format, "2026-12-01 19:51:20 UTC".

    Takes a datetime (naive ones are UTC), ISO 8601 text (as JSON columns hold them) or seconds
    since the epoch (as journal entries hold them); "" for None, "never" for PostgreSQL's
    'infinity', anything else unchanged."""
    if value is None or value == "":
        return ""
    if value == "infinity":
        return "never"
    at = _as_datetime(value)
    return str(value) if at is None else at.astimezone(dt.UTC).strftime(TIMESTAMP_FORMAT)


@register.filter
def when_exact(value) -> str:
    """The same instant as ISO 8601 to the microsecond, for a title attribute; "" when not a
    timestamp."""
    at = _as_datetime(value)
    return "" if at is None else at.astimezone(dt.UTC).isoformat()


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


_OUTCOMES = {
    "COMMITTED": "sent once, confirmed",
    "COMMITTED_BY_RETRY": "sent once (a resend under the same key)",
    "COMMITTED_ON_QUERY": "sent once (found by a lookup)",
    "REAPPLIED_AFTER_QUERY": "sent again after a lookup",
    "DUPLICATE_IGNORED": "already sent before",
    "AMBIGUOUS": "outcome unknown: a person must reconcile it",
    "rejected": "rejected by a person",
    "approval expired": "the approval request expired",
}


@register.filter
def outcome_words(status) -> str:
    """A workflow result's ``status`` in words ("REFUSED:stale_premise" -> "refused: the premises
    changed", ...); unknown values unchanged."""
    status = "" if status is None else str(status)
    if status.startswith("REFUSED:"):
        why = status.split(":", 1)[1]
        return "refused: " + {
            "stale_premise": "the premises changed",
            "lease": "the grant did not cover it",
            "cancelled": "the workflow was cancelled",
            "target": "the target said no",
            "conflicting_payload": "another payload than the approved one",
            "stale_premise_at_recovery": "the premises changed (at recovery)",
            "lease_at_recovery": "the grant was revoked or expired (at recovery)",
        }.get(why, why)
    return _OUTCOMES.get(status, status)


_EFFECT_STATES = {
    "proposed": "proposed, not sent yet",
    "dispatched": "sent, waiting for the answer",
    "committed": "done: the target confirmed it",
    "ambiguous": "outcome unknown: a person must reconcile it",
}


@register.filter
def effect_state_words(state) -> str:
    """An effect row's ``state`` in words ("committed" -> "done: the target confirmed it"); unknown
    values unchanged. A refusal leaves the state "proposed": the case page tells it apart by
    the effect's REFUSED entry."""
    state = "" if state is None else str(state)
    return _EFFECT_STATES.get(state, state)


@register.filter
def outcome_class(status) -> str:
    """The badge class of a result status: "ok" for a confirmed send, "bad" for a refusal or an
    unknown outcome, "warn" otherwise."""
    status = "" if status is None else str(status)
    if status.startswith("COMMITTED") or status in ("DUPLICATE_IGNORED", "REAPPLIED_AFTER_QUERY"):
        return "ok"
    if status.startswith("REFUSED") or status == "AMBIGUOUS":
        return "bad"
    return "warn" if status else "ok"


@register.filter
def step_error_badge(step) -> tuple[str, str]:
    """(badge class, words) for a step row with an error, in the case's timeline.

    A signal wait that timed out is a normal outcome, not a failure: "expired" (neutral) for the
    wait on an approval request, "timed out" (neutral) for any other signal. Every other error
    is "error" in red."""

    def field(name: str):
        return step.get(name) if isinstance(step, dict) else getattr(step, name, None)

    error, kind, name = field("error"), field("kind"), field("name") or ""
    if kind == "signal" and isinstance(error, dict) and error.get("type") == "SignalTimeout":
        return ("", "expired") if str(name).startswith(APPROVAL_REQUEST_SIGNAL_PREFIX) else ("", "timed out")
    return ("bad", "error")


@register.filter
def approved_by(card, user) -> bool:
    """True when the logged-in ``user`` approved ``card``'s request already, compared as an
    identity (``RequestCard.approved_by``): the button then waits for a second person."""
    return card.approved_by(user.get_username())


# -- untrusted text: what is not plain printable text is shown as its code point -------------------

_PLAIN_CONTROLS = frozenset("\n\t")
"""Line breaks and tabs read as what they are (reasoning, multi-line JSON); every other control,
format (bidirectional overrides, zero-width), separator other than " ", surrogate, private-use or
unassigned character is escaped."""

_FLAGGED_SCRIPTS = ("CYRILLIC", "GREEK")
"""Scripts whose letters pass for Latin ones (Cyrillic "а", Greek "ο"): in a word that also holds
Latin letters, each of their letters is escaped and the text flagged. Per word, so a Russian name
beside an English key in one JSON document reads as written."""

_WORD = re.compile(r"\w+")


def _script(ch: str) -> str | None:
    """ "LATIN", "CYRILLIC" or "GREEK" for a letter of those scripts, else None (by its Unicode
    name, which starts with the script's name for every letter of the three)."""
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    for script in ("LATIN", *_FLAGGED_SCRIPTS):
        if name.startswith(script):
            return script
    return None


def _code_point(ch: str) -> str:
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"


def hidden_characters(text: str) -> tuple[list[tuple[str, bool]], list[str]]:
    """``text`` split into runs of (text, escaped) and the reasons it is not plain.

    A character is escaped when it is not printable (``str.isprintable``, except "\\n", "\\t"
    and " "), or when it is a Cyrillic or Greek letter in a word that also holds Latin letters
    (mixed script: "pаypal" with a Cyrillic "а"). Escaped runs hold the code points as written in
    Python ("\\u202e").
    """
    lookalikes: set[int] = set()
    for word in _WORD.finditer(text):
        scripts = {_script(ch) for ch in word.group()} - {None}
        if "LATIN" in scripts and len(scripts) > 1:
            lookalikes.update(i for i in range(word.start(), word.end()) if _script(text[i]) in _FLAGGED_SCRIPTS)
    runs: list[tuple[str, bool]] = []
    reasons: list[str] = []
    for i, ch in enumerate(text):
        invisible = not (ch.isprintable() or ch in _PLAIN_CONTROLS)
        lookalike = i in lookalikes
        if invisible and "invisible or control characters" not in reasons:
            reasons.append("invisible or control characters")
        if lookalike and "mixed scripts (Latin with Cyrillic or Greek)" not in reasons:
            reasons.append("mixed scripts (Latin with Cyrillic or Greek)")
        escaped = invisible or lookalike
        piece = _code_point(ch) if escaped else ch
        if runs and runs[-1][1] == escaped:
            runs[-1] = (runs[-1][0] + piece, escaped)
        else:
            runs.append((piece, escaped))
    return runs, reasons


def reveal_html(text: str) -> SafeString:
    """``text`` as HTML with every character that is not plain printable text shown as its code
    point (``hidden_characters``) in a ``span.cp``, and a ``span.hidden-chars`` warning badge
    naming why; plain text is only escaped."""
    runs, reasons = hidden_characters(text)
    if not reasons:
        return escape(text)
    body = "".join(
        format_html('<span class="cp" title="{}">{}</span>', _names(piece), piece) if escaped else escape(piece)
        for piece, escaped in runs
    )
    badge = format_html(
        ' <span class="badge bad hidden-chars" title="{}">{}</span>',
        "Shown as code points: what the page would otherwise show is not what the text holds.",
        "hidden characters: " + "; ".join(reasons),
    )
    return mark_safe(body + badge)  # noqa: S308 - every piece is escaped or format_html above


def _names(escaped: str) -> str:
    points = [int(p[1:], 16) for p in escaped.replace("\\U", "\\u").split("\\") if p]
    return ", ".join(f"U+{p:04X} {unicodedata.name(chr(p), 'unnamed')}" for p in points)


@register.filter
def reveal(value) -> SafeString:
    """Untrusted text (a payload value, premise, summary, reasoning, reference) as the approver
    must see it: ``reveal_html`` of ``value``, or of its compact JSON (``as_json``) when it is not
    text. The one filter every page uses where such text is shown."""
    return reveal_html(value if isinstance(value, str) else as_json(value))
