"""The send watchdog (ilr/watchdog.py, docs/protocol.md §6.3, A1): one thread per process watches
every open send and ends the process when one outlives its deadline. Each case runs in its own
Python subprocess, because firing is a real os._exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from tests.conftest import ROOT


def _run(body: str, timeout: float = 30) -> tuple[int, str, float]:
    code = "import threading, time\nfrom ilr.watchdog import Watchdog\n" + textwrap.dedent(body)
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stderr, time.monotonic() - t


def test_a_send_past_its_deadline_ends_the_process():
    rc, err, took = _run("""
        with Watchdog(0.3, "eff_slow"):
            time.sleep(20)
    """)
    assert rc == 70, err
    assert "send of eff_slow outlived its 0.300s deadline" in err
    assert took < 10


def test_a_send_that_ends_in_time_does_not_fire():
    rc, err, _ = _run("""
        for i in range(50):
            with Watchdog(0.2, f"eff_{i}"):
                time.sleep(0.001)
        time.sleep(0.5)  # every deadline has passed; none of those sends is open
    """)
    assert rc == 0, err
    assert "watchdog" not in err


def test_a_shorter_deadline_registered_later_still_fires_on_time():
    """The thread waits for the earliest deadline: a 60 s send is open when a 0.3 s send starts
    in another thread, and the 0.3 s one must end the process well before 60 s."""
    rc, err, took = _run(
        """
        def long_send():
            with Watchdog(60, "eff_long"):
                time.sleep(120)
        threading.Thread(target=long_send, daemon=True).start()
        time.sleep(0.3)
        with Watchdog(0.3, "eff_short"):
            time.sleep(120)
    """,
        timeout=60,
    )
    assert rc == 70, err
    assert "eff_short" in err
    assert took < 15


def test_a_later_deadline_that_does_not_wake_the_thread_still_fires():
    """A send whose deadline is later than the one the thread waits for does not notify it
    (issue 9); the thread finds that send when it wakes for the earlier one, which ended."""
    rc, err, took = _run(
        """
        with Watchdog(1.0, "eff_first"):
            time.sleep(0.3)  # the thread has started and waits for eff_first's deadline
        with Watchdog(2.0, "eff_second"):
            time.sleep(120)
    """,
        timeout=60,
    )
    assert rc == 70, err
    assert "eff_second" in err and "eff_first" not in err
    assert took < 15
