"""The demo itself (issue 3): `manage.py demo` at tier 1 exits 0 and reports a verified receipt."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT


def test_demo_tier1_exit_status(test_dsn, tmp_path):
    from tests.conftest import WorkerProcs

    # The demo runs against this session's test database (ILR_DB_NAME), as a user would run it.
    env = WorkerProcs(tmp_path).env()
    proc = subprocess.run([sys.executable, str(ROOT / "manage.py"), "demo", "--tier", "1"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: the ledger and the receipt agree" in proc.stdout
    assert "COMMITTED_BY_RETRY" in proc.stdout
    assert "SIGKILLed at kill point effect_after_send" in proc.stdout


@pytest.mark.parametrize("intruder", ["intruder", "demo-w1"])
def test_demo_names_a_foreign_worker_that_claimed_its_case(workers, tmp_path, intruder):
    """A worker that is not the demo's and serves the refund workflow on the same database
    claims the demo's case first. The demo fails at once and names it: before, it waited 60 s
    and said only that the workflow did not ask for approval (a fresh user's find). "demo-w1"
    is a worker left behind by an earlier demo (killed with kill -9), whose id the demo's own
    first worker had too."""
    import time

    from tests.conftest import wait_for

    workers.start(intruder, poll=0.05, concurrency=2)
    wait_for(lambda: "running" in workers.log(intruder), timeout=60, message="the intruder polls")
    started = time.monotonic()
    proc = subprocess.run([sys.executable, str(ROOT / "manage.py"), "demo", "--tier", "1"], cwd=ROOT,
                          env=workers.env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: workflow case-" in proc.stdout and f"was claimed by worker '{intruder}'" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert time.monotonic() - started < 45
