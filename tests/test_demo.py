"""The demo itself (issue 3): `manage.py demo` at tier 1 exits 0 and reports a verified receipt."""

from __future__ import annotations

import subprocess
import sys

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
