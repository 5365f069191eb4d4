"""``manage.py ilr_worker`` from a user's shell: a bad flag is one clean CommandError line naming
the flag and the rule (exit 2, as argparse's own usage errors), never a traceback; a good start
prints one line saying what the worker runs."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.waits import wait_for


def worker_cmd(workers, *args):
    """Run the worker to its refusal; a worker that starts instead would run until the timeout."""
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "ilr_worker", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=45,
        check=False,
        env=workers.env(),
    )


GOOD = ("--id", "w1", "--import", "tests.support.flows")


@pytest.mark.parametrize(
    "args, words",
    [
        (("--concurrency", "0"), ["--concurrency", "at least 1", "0"]),
        (("--concurrency", "-3"), ["--concurrency", "at least 1", "-3"]),
        (("--lease-ttl", "0"), ["--lease-ttl", "positive", "0"]),
        (("--lease-ttl", "nan"), ["--lease-ttl", "positive", "nan"]),
        (("--poll", "-1"), ["--poll", "positive", "-1"]),
        (("--poll", "inf"), ["--poll", "positive", "inf"]),
        (("--max-takeovers", "-1"), ["--max-takeovers", "0 or more", "-1"]),
        (("--id", ""), ["--id", "non-empty"]),
        (("--id", "   "), ["--id", "non-empty"]),
        (("--import", "no.such.module"), ["--import", "no.such.module"]),
        (("--import", ""), ["--import", "module name"]),
        (("--only", "nope@1"), ["--only", "nope@1"]),
        # An empty value (a deploy script's unset variable) is refused: it served every workflow.
        (("--only", ""), ["--only", "names no name@version"]),
        (("--queue", ""), ["--queue", "names no queue"]),
        (("--queue", " , "), ["--queue", "names no queue"]),
        (
            ("--import", "tests.support.thin_margin_target"),
            ["--import", "tests.support.thin_margin_target", "DEDUP_MARGIN"],
        ),
    ],
)
def test_bad_flags_are_one_clean_line(workers, args, words):
    proc = worker_cmd(workers, *GOOD, *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith("CommandError: ")
    for word in words:
        assert word in lines[0], lines[0]
    assert proc.stdout == ""


def test_startup_line_then_exit_line(workers):
    proc = workers.start("up", lease_ttl=3, poll=0.5, concurrency=2)
    line = wait_for(
        lambda: next((ln for ln in workers.log("up").splitlines() if "running" in ln), None),
        timeout=60,
        message="the startup line",
    )
    assert line.startswith("ilr_worker up: running ")
    assert "three_steps@" in line and line.endswith("(concurrency 2, lease_ttl 3 s, poll 0.5 s)"), line
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, workers.log("up")
    log = workers.log("up")
    assert "Traceback" not in log
    last = log.splitlines()[-1]
    assert last.startswith("ilr_worker up: claimed 0 runs (0 takeovers); heartbeat: "), last
