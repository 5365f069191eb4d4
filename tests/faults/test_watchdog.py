"""The send watchdog (ilr/_worker/watchdog.py, docs/protocol.md §6.3, A1): one thread per process watches
every open send and ends the process when one outlives its deadline, in a process that opted in
(the ilr_worker command); elsewhere it ends that send only, with SendOverrun. Each case runs in
its own Python subprocess, because firing is a real os._exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from tests.support import ROOT


def _run(body: str, timeout: float = 30, opt_in: bool = True) -> tuple[int, str, float]:
    code = "import threading, time\nfrom ilr._worker.watchdog import Watchdog, SendOverrun, exit_on_overrun\n"
    code += "exit_on_overrun()\n" if opt_in else ""
    code += textwrap.dedent(body)
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


def test_without_the_opt_in_an_overrun_ends_the_send_not_the_process():
    """A process that did not opt in (a web process running rt.recover_orphans): the sender's
    thread is interrupted at the deadline and the block raises SendOverrun (an unknown outcome,
    an Exception), even when the target swallows the interrupt; the process goes on."""
    rc, err, took = _run(
        """
        import sys
        try:
            with Watchdog(0.3, "eff_busy"):
                while True:  # Python code: interrupted at the deadline
                    time.sleep(0.01)
        except SendOverrun as exc:
            print(f"caught: {exc}", file=sys.stderr)
        try:
            with Watchdog(0.3, "eff_swallowing"):
                for _ in range(100):
                    try:
                        time.sleep(0.05)
                    except BaseException:
                        pass  # a target that catches everything still ends as an overrun
        except SendOverrun:
            print("caught again", file=sys.stderr)
        with Watchdog(5, "eff_quick"):
            pass
        time.sleep(0.5)
        print("alive", file=sys.stderr)
    """,
        opt_in=False,
    )
    assert rc == 0, err
    assert "eff_busy outlived its 0.300s deadline; interrupting it" in err, err
    assert "exiting" not in err and "eff_quick" not in err, err
    assert "caught: send of eff_busy outlived its 0.300s deadline" in err, err
    assert "caught again" in err and err.rstrip().endswith("alive"), err
    assert took < 15
