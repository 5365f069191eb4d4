"""Deterministic trace and span ids (docs/guides/telemetry.md, "Span ids and replay").

A workflow's spans live in the trace of its lineage's root id: the id before the first "/" (a
default child id, ``<parent>/<seq>``) and "#" (a successor, ``<id>#<n>``). Each span's id hashes
what identifies the work it covers, never the clock or a random draw: the workflow span by the
workflow id, a run by (workflow id, epoch), a step attempt by (workflow id, seq, epoch). The same
work asked twice gets the same id, and two different pieces of work never share one.

The OpenTelemetry API lets the SDK choose span ids; ``IdGenerator`` below is the SDK hook (its
``generate_span_id`` and ``generate_trace_id``, duck-typed so that this module needs no SDK) that
hands the SDK the id ``ilr._telemetry.tracing`` asks for, and a random one for everybody else's
spans.
"""

from __future__ import annotations

import hashlib
import random
from contextvars import ContextVar

_NEXT_SPAN_ID: ContextVar[int | None] = ContextVar("ilr_next_span_id", default=None)
_NEXT_TRACE_ID: ContextVar[int | None] = ContextVar("ilr_next_trace_id", default=None)


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()


def lineage_root(workflow_id: str) -> str:
    """The id whose trace holds ``workflow_id``: the part before the first "/" and "#"."""
    return workflow_id.split("/", 1)[0].split("#", 1)[0]


def trace_id_for(workflow_id: str) -> int:
    """The 128-bit trace id of ``workflow_id``'s lineage (never 0, as W3C requires)."""
    return int.from_bytes(_digest("ilr-trace", lineage_root(workflow_id))[:16], "big") or 1


def span_id_for(kind: str, *parts: object) -> int:
    """The 64-bit span id of the span ``kind`` ("workflow", "run", "step", ...) over ``parts``
    (the workflow id first, then seq, epoch, ...); never 0."""
    return int.from_bytes(_digest("ilr-span", kind, *parts)[:8], "big") or 1


class IdGenerator:
    """An OpenTelemetry SDK id generator (``TracerProvider(id_generator=IdGenerator())``): the span
    id ``ilr._telemetry.tracing`` set for the span being started, else a random one like the
    SDK's own RandomIdGenerator. Without it, ilr's spans get random ids and its workflow span
    (emitted with the id its runs already name as their parent) is not found by its children."""

    def generate_span_id(self) -> int:
        wanted = _NEXT_SPAN_ID.get()
        if wanted is not None:
            _NEXT_SPAN_ID.set(None)  # one span: a span started inside another's start gets its own
            return wanted
        return random.getrandbits(64) or 1

    def is_trace_id_random(self) -> bool:
        """False: a workflow's trace id is a hash (W3C's random flag must not be set)."""
        return False

    def generate_trace_id(self) -> int:
        wanted = _NEXT_TRACE_ID.get()  # asked for a root span only (a child takes its parent's)
        if wanted is not None:
            _NEXT_TRACE_ID.set(None)
            return wanted
        return random.getrandbits(128) or 1


def want(span_id: int, trace_id: int | None = None) -> tuple:
    """Ask the IdGenerator for ``span_id`` (and, for a root span, ``trace_id``) for the next span
    started in this context; returns the tokens for ``release``."""
    return _NEXT_SPAN_ID.set(span_id), _NEXT_TRACE_ID.set(trace_id)


def release(tokens: tuple) -> None:
    """Undo ``want`` (whether or not a span took the ids)."""
    _NEXT_SPAN_ID.reset(tokens[0])
    _NEXT_TRACE_ID.reset(tokens[1])
