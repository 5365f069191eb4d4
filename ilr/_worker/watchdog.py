"""The send watchdog (docs/protocol.md §6.3, assumption A1): a send that outlives its local
deadline ends the process, in a process that opted in (``exit_on_overrun``: the ``ilr_worker``
command); anywhere else it ends that send only.

A socket timeout bounds each read, not the whole request (a trickle of bytes, a blocked
resolver); only a process exit guarantees that no byte of a send leaves after its deadline.
Other runs in the process then count as crashed and are recovered like any crash.

The runtime never ends a caller's process: ``rt.recover_orphans`` may run in a web process (an
admin action, a view), whose other requests are not the runtime's to end. There, an overrun
interrupts the sending thread (``SendOverrun`` raised at its next Python bytecode, once a
blocking call returns) and the block raises ``SendOverrun``, an unknown outcome: the caller
writes nothing and leaves the effect for recovery. A send blocked in C (a socket read) is
bounded there only by the target's socket timeout (``apply(timeout=...)``).

One daemon thread per process watches every open send. It is started by the first send, so
a send costs a dict insert, not a thread start (issue 9: the gated effect's overhead). It
wakes at the earliest deadline; a send that ended meanwhile has left the table, and the
thread waits again. A send whose deadline is later than the one the thread waits for does
not wake it.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import sys
import threading
import time

from ilr._errors import SendOverrun

WATCHDOG_EXIT_CODE = 70
"""The exit status of a process ended by the watchdog."""


class _Interrupt(BaseException):
    """Raised asynchronously in an overrun sender's thread. A BaseException, so that the
    target's own ``except Exception`` does not swallow it; the Watchdog block turns it into
    SendOverrun."""


_cond = threading.Condition()
# token -> (monotonic deadline, token, effect id, seconds, the Watchdog); the token breaks ties
# so that min() never compares two Watchdogs.
_open: dict[int, tuple[float, int, str, float, Watchdog]] = {}
_tokens = itertools.count()
_thread: threading.Thread | None = None
_exit_on_overrun = False


_wakes_at: float | None = None  # the monotonic time the thread waits until; None: no deadline


def exit_on_overrun() -> None:
    """Opt this process in to ending itself when a send overruns (A1, docs/protocol.md §6.3).

    Only a process whose every run the runtime owns may call it: the ``ilr_worker`` command
    does, at start. Elsewhere (a web process, a test, a script) an overrun ends that send with
    SendOverrun, an unknown outcome, and the process goes on.
    """
    global _exit_on_overrun
    _exit_on_overrun = True


def _set_async_exc(thread_id: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in thread ``thread_id`` at its next bytecode; None clears a pending one."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc else None)


def _watch() -> None:
    global _wakes_at
    with _cond:
        while True:
            if not _open:
                _wakes_at = None
                _cond.wait()
                continue
            at, token, effect_id, seconds, dog = min(_open.values())
            left = at - time.monotonic()
            if left <= 0:
                if _exit_on_overrun:
                    sys.stderr.write(
                        f"ilr watchdog: send of {effect_id} outlived its {seconds:.3f}s deadline; exiting\n"
                    )
                    sys.stderr.flush()
                    os._exit(WATCHDOG_EXIT_CODE)
                # Not ours to end: interrupt the sender. Off the table now, so it fires once
                # even if the sender never reaches __exit__ (the interrupt landed before it).
                del _open[token]
                dog.fired = True
                _set_async_exc(dog.thread_id, _Interrupt)
                sys.stderr.write(
                    f"ilr watchdog: send of {effect_id} outlived its {seconds:.3f}s deadline; "
                    "interrupting it (unknown outcome)\n"
                )
                sys.stderr.flush()
                continue
            _wakes_at = at
            _cond.wait(left)


class Watchdog:
    """Context manager around one send: if the block is still running ``seconds`` after it was
    entered, the process exits (after ``exit_on_overrun``) or the block raises SendOverrun.

    Args:
        seconds: the send's remaining local time (docs/protocol.md §6.3), > 0.
        effect_id: named in the line written to stderr when it fires.

    Raises:
        SendOverrun: (on leaving the block) it overran, in a process that did not opt in.
    """

    def __init__(self, seconds: float, effect_id: str):
        self.seconds = seconds
        self.effect_id = effect_id
        self._token = next(_tokens)
        self.fired = False
        self.thread_id = threading.get_ident()

    def __enter__(self) -> Watchdog:
        try:
            self._register()
            return self
        except _Interrupt:
            # A deadline so short that it fired before the block began: nothing was sent.
            raise SendOverrun(f"send of {self.effect_id} outlived its {self.seconds:.3f}s deadline") from None

    def _register(self) -> None:
        global _thread
        with _cond:
            self.thread_id = threading.get_ident()
            at = time.monotonic() + self.seconds
            _open[self._token] = (at, self._token, self.effect_id, self.seconds, self)
            if _thread is None or not _thread.is_alive():
                _thread = threading.Thread(target=_watch, name="ilr-watchdog", daemon=True)
                _thread.start()
            elif _wakes_at is None or at < _wakes_at:
                # Woken only for a deadline earlier than the one it waits for: one send after
                # another with the same timeout never wakes it (a thread switch saved per send).
                _cond.notify()

    def __exit__(self, exc_type, exc, tb) -> None:
        # No notify: the thread wakes at the deadline it waits for, finds it gone, and waits
        # for the next one.
        try:
            with _cond:
                _open.pop(self._token, None)
                if self.fired:
                    # The watchdog fires under this lock, so after it no interrupt can be set
                    # for this send: clear one not yet delivered, lest it land after the block.
                    _set_async_exc(self.thread_id, None)
        except _Interrupt as interrupt:
            exc = interrupt  # delivered here, on the way out: the send overran all the same
        if self.fired:
            # Whatever the block did (an answer, the interrupt, a socket error), its outcome
            # is unknown: the answer came past the deadline, or never.
            raise SendOverrun(f"send of {self.effect_id} outlived its {self.seconds:.3f}s deadline") from exc
