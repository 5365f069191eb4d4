"""Kill points (docs/protocol.md §12): the one implementation, shared with the Temporal baselines.

ILR_KILL_AT and ILR_STOP_AT are comma lists of ``name`` or ``name@n`` (the nth time the point is
hit in this process). At a matching point the process sends itself SIGKILL (instrumented
SIGKILL) or SIGSTOP (the harness sends SIGCONT).
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

POINTS = (
    "claimed",
    "step_before_record",
    "step_after_record",
    "decide_after_response",
    "effect_before_dispatch",
    "effect_after_dispatch",
    "effect_after_send",
    "effect_after_commit",
    "resolve_after_commit",
    "resolve_after_send",
    "wait_after_suspend",
    "replay_page",
)
_hits: Counter = Counter()


def _parse(spec: str) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, n = item.partition("@")
        if name not in POINTS:
            raise ValueError(f"kill point {name!r} is not one of {', '.join(POINTS)}")
        out[name] = int(n) if n else None
    return out


def _armed() -> tuple[tuple[signal.Signals, dict[str, int | None]], ...]:
    """The (signal, wanted points) pairs this process's environment asks for, parsed once.

    The harness sets ILR_KILL_AT and ILR_STOP_AT when it starts a process, so they are read at
    the first hit; ``reset()`` reads them again. A hit on the hot path (two per step) is then a
    counter increment and, unarmed, nothing else (issue 9: reading and parsing the environment
    on every hit was 5% of a worker's CPU).
    """
    global _ARMED
    if _ARMED is None:
        _ARMED = tuple(
            (sig, _parse(spec))
            for var, sig in (("ILR_KILL_AT", signal.SIGKILL), ("ILR_STOP_AT", signal.SIGSTOP))
            if (spec := os.environ.get(var))
        )
    return _ARMED


_ARMED: tuple | None = None


def reset() -> None:
    """Forget the hit counts and read ILR_KILL_AT and ILR_STOP_AT again at the next hit."""
    global _ARMED
    _ARMED = None
    _hits.clear()


def hit(name: str) -> None:
    """Mark that the process reached kill point ``name``; SIGKILL or SIGSTOP it when asked.

    Raises:
        ValueError: ILR_KILL_AT or ILR_STOP_AT names a point not in POINTS (at the first hit).
    """
    _hits[name] += 1
    for sig, wanted in _armed():
        if name in wanted and wanted[name] in (None, _hits[name]):
            # Directed at this thread, the signal is acted on as the syscall returns: the
            # thread at the kill point stops (or dies) here, not a moment later. (os.kill
            # to the process lets the kernel pick a thread, and the caller ran on.)
            signal.pthread_kill(threading.get_ident(), sig)
