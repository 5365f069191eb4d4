"""Make kill-point SIGSTOPs land at the kill point, in the harness's worker processes.

``ilr._killpoints.hit`` once stopped the process with ``os.kill(os.getpid(), SIGSTOP)``. That signal is
process-directed: when the calling thread is not the main thread (a runtime run thread, a
Temporal activity thread), the kernel hands it to the main thread, and the calling thread runs
on until the group stop reaches it. Measured here: a Temporal activity's HTTP request reached
the target before its process showed as stopped, and a runtime sender passed its deadline check
and sent after SIGCONT (scenarios S12, S13). The harness needs the stop exactly at the point, so
in its own worker processes it wraps ``hit``: when ILR_STOP_AT stops the process at the point just
hit, the calling thread waits for the harness's SIGCONT (a thread taking SIGCONT with sigwait
sets an event; at most 1 s), so the group stop takes it at the point and it resumes as soon as
it is continued. SIGKILL is unaffected (a fatal signal kills every thread at once).
ilr.killpoints has since taken the proper fix, a thread-directed
``signal.pthread_kill(threading.get_ident(), SIGSTOP)``; this wait stays as a second guard in
the harness's own processes.

Usage: ``python -m prove.harness.worker_shim ilr_worker --id ...`` (runs manage.py's command with the
wrap installed); the Temporal worker calls ``install()`` itself.
"""

from __future__ import annotations

import os
import sys

STOP_WAIT_S = 1.0


def preload() -> None:
    """Import the model SDK the decide step uses before the worker says it is ready.

    The decide step (runtime), activity (Temporal) and step (DBOS) import ``anthropic`` on first
    use. Imported there, its first-use cost (seconds on a loaded machine) fell inside Temporal's
    start_to_close for the decide activity, which timed out and ran again, so the model was called
    twice; a deployed worker imports its SDKs at start. Every system's worker pays it up front.
    """
    import anthropic  # noqa: F401


def _stop_wait_s() -> float:
    """How long a stopped thread waits for SIGCONT before going on (ILR_SHIM_STOP_WAIT_S, seconds)."""
    return float(os.environ.get("ILR_SHIM_STOP_WAIT_S", STOP_WAIT_S))


def _sigcont_event():
    """An event set whenever this process receives SIGCONT.

    A Python signal handler runs only when the main thread next runs Python, and a process-directed
    SIGCONT is delivered to whichever thread the kernel picks: measured in the DBOS worker (main
    thread blocked in ``Event.wait``) the handler ran a full STOP_WAIT_S late in most runs, and in
    ``ilr_worker`` at its next idle poll (~0.46 s), so the sender went on seconds or half a second
    after the harness's SIGCONT, not at it. Instead SIGCONT is blocked in this thread, before any
    other thread exists, so every thread started later inherits the block, and one thread takes it
    with ``sigwait`` the moment it arrives. (The kernel continues a stopped process on SIGCONT
    whether or not the signal is blocked.)"""
    import signal
    import threading

    continued = threading.Event()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCONT})

    def take() -> None:
        while True:
            signal.sigwait({signal.SIGCONT})
            continued.set()

    threading.Thread(target=take, name="prove-sigcont", daemon=True).start()
    return continued


def install() -> None:
    """Make kill-point SIGSTOPs land at the point and preload the model SDK (module docstring).
    Call it first in the worker's main thread, before any other thread starts."""
    import threading

    from ilr import _killpoints as killpoints

    if getattr(killpoints.hit, "_prove_wrapped", False):
        return
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("worker_shim.install() must run in the main thread, before other threads start")
    continued = _sigcont_event()
    preload()
    original = killpoints.hit

    def hit(name: str) -> None:
        spec = os.environ.get("ILR_STOP_AT")
        stops = False
        if spec:
            wanted = killpoints._parse(spec)
            # killpoints counts this hit inside original(); it stops when the count matches.
            stops = name in wanted and wanted[name] in (None, killpoints._hits[name] + 1)
        continued.clear()
        original(name)
        if stops:
            # The SIGSTOP may reach this thread late; wait here until the harness's SIGCONT (taken
            # by the sigwait thread above), so nothing runs past the point first.
            continued.wait(_stop_wait_s())

    hit._prove_wrapped = True
    killpoints.hit = hit


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "interlock_project.settings")
    install()
    from django.core.management import execute_from_command_line

    execute_from_command_line(["manage.py", *sys.argv[1:]])


if __name__ == "__main__":
    main()
