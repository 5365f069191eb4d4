"""The send watchdog (docs/protocol.md §6.3, assumption A1): a send that outlives its local
deadline ends the process.

A socket timeout bounds each read, not the whole request (a trickle of bytes, a blocked
resolver); only a process exit guarantees that no byte of a send leaves after its deadline.
Other runs in the process then count as crashed and are recovered like any crash.

One daemon thread per process watches every open send. It is started by the first send, so
a send costs a dict insert, not a thread start (issue 9: the gated effect's overhead). It
wakes at the earliest deadline; a send that ended meanwhile has left the table, and the
thread waits again. A send whose deadline is later than the one the thread waits for does
not wake it.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time

WATCHDOG_EXIT_CODE = 70
"""The exit status of a process ended by the watchdog."""

_cond = threading.Condition()
_open: dict[int, tuple[float, str, float]] = {}  # token -> (monotonic deadline, effect id, seconds)
_tokens = itertools.count()
_thread: threading.Thread | None = None


_wakes_at: float | None = None  # the monotonic time the thread waits until; None: no deadline


def _watch() -> None:
    global _wakes_at
    with _cond:
        while True:
            if not _open:
                _wakes_at = None
                _cond.wait()
                continue
            at, effect_id, seconds = min(_open.values())
            left = at - time.monotonic()
            if left <= 0:
                sys.stderr.write(f"ilr watchdog: send of {effect_id} outlived its {seconds:.3f}s deadline; exiting\n")
                sys.stderr.flush()
                os._exit(WATCHDOG_EXIT_CODE)
            _wakes_at = at
            _cond.wait(left)


class Watchdog:
    """Context manager around one send: the process exits if the block is still running
    ``seconds`` after it was entered.

    Args:
        seconds: the send's remaining local time (docs/protocol.md §6.3), > 0.
        effect_id: named in the line written to stderr when it fires.
    """

    def __init__(self, seconds: float, effect_id: str):
        self.seconds = seconds
        self.effect_id = effect_id
        self._token = next(_tokens)

    def __enter__(self) -> Watchdog:
        global _thread
        with _cond:
            at = time.monotonic() + self.seconds
            _open[self._token] = (at, self.effect_id, self.seconds)
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(target=_watch, name="ilr-watchdog", daemon=True)
                _thread.start()
            elif _wakes_at is None or at < _wakes_at:
                # Woken only for a deadline earlier than the one it waits for: one send after
                # another with the same timeout never wakes it (a thread switch saved per send).
                _cond.notify()
        return self

    def __exit__(self, *exc) -> None:
        # No notify: the thread wakes at the deadline it waits for, finds it gone, and waits
        # for the next one.
        with _cond:
            _open.pop(self._token, None)
