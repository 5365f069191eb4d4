"""The operator commands: ilr_check (the registry over a database, exit 1 on a violation),
receipt (a bundle and its verify() answers), ilr_keys, and the public API list."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support import ROOT
from tests.support.refund_harness import approve, refund_env


def manage(workers, *args, **env):
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=workers.env(env),
    )


def test_ilr_check_and_receipt_commands(rt, workers, tmp_path):
    with refund_env(tmp_path, 1) as env:
        workers.start("A", env=env.worker_env())
        case = env.case("cmd")
        rt.start("refund_signal", "cmd", case)
        approve(rt, "cmd")
        result = rt.result("cmd", timeout=60)
    ledger = str(tmp_path / "ledger.sqlite")
    ok = manage(workers, "ilr_check", "--ledger", ledger)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "CommittedImpliesApplied        held" in ok.stdout and "VIOLATED" not in ok.stdout
    rec = manage(workers, "receipt", result["effect_id"], "--verify")
    assert rec.returncode == 0, rec.stderr
    out = json.loads(rec.stdout)
    assert out["verify"]["happened"] is True and out["verify"]["chain_intact"] is True
    unknown = manage(workers, "receipt", "eff_nope")
    assert unknown.returncode != 0 and "no effect with id 'eff_nope'" in unknown.stderr
    # A ledger that lost the refund: the registry reports it and exits 1.
    import sqlite3

    con = sqlite3.connect(ledger)
    con.execute("delete from refunds")
    con.commit()
    con.close()
    bad = manage(workers, "ilr_check", "--ledger", ledger)
    assert bad.returncode == 1 and "CommittedImpliesApplied        VIOLATED" in bad.stdout
    # The evidence in the workers fixture's teardown comes from the (intact) ledger read earlier.


def test_ilr_keys_generate_refuses_to_overwrite(workers, tmp_path):
    first = manage(workers, "ilr_keys", "generate", "--dir", str(tmp_path / "k"))
    assert first.returncode == 0 and (tmp_path / "k" / "ed25519.pem").stat().st_mode & 0o777 == 0o600
    again = manage(workers, "ilr_keys", "generate", "--dir", str(tmp_path / "k"))
    assert again.returncode != 0 and "exists" in again.stderr
