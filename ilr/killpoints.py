"""Kill points (spec §2.2): the one implementation, shared with the Temporal baselines.

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
    "claimed", "step_before_record", "step_after_record", "decide_after_response",
    "effect_before_dispatch", "effect_after_dispatch", "effect_after_send", "effect_after_commit",
    "resolve_after_commit", "resolve_after_send", "wait_after_suspend",
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


def hit(name: str) -> None:
    """Mark that the process reached kill point ``name``; SIGKILL or SIGSTOP it when asked."""
    _hits[name] += 1
    for var, sig in (("ILR_KILL_AT", signal.SIGKILL), ("ILR_STOP_AT", signal.SIGSTOP)):
        spec = os.environ.get(var)
        if spec:
            wanted = _parse(spec)
            if name in wanted and wanted[name] in (None, _hits[name]):
                # Directed at this thread, the signal is acted on as the syscall returns: the
                # thread at the kill point stops (or dies) here, not a moment later. (os.kill
                # to the process lets the kernel pick a thread, and the caller ran on.)
                signal.pthread_kill(threading.get_ident(), sig)
