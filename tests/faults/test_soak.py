"""``manage.py soak`` end to end, short: real worker subprocesses SIGKILLed and SIGSTOPped, the real
targets' faults, the embedded PostgreSQL crashed and restarted under the run. Checks that the
soak injects every kind of fault it names, checks the invariants, and reports; the hour-long run
is results/runtime_soak.md (``python manage.py soak --minutes 60``), never a timed test.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support import ROOT


def test_short_soak_injects_every_fault_and_reports_clean(tmp_path):
    from django.conf import settings
    from django.db import connections

    if not getattr(settings, "ILR_EMBEDDED_PGDATA", None):
        pytest.skip("the soak crashes the server: it needs the embedded PostgreSQL")  # pragma: no cover
    out = tmp_path / "results"
    # The suite's embedded cluster: the soak makes its own database in it and crashes the server.
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "soak",
            "--minutes",
            "0.75",
            "--fault-every",
            "2",
            "--pg-restart-every",
            "20",
            "--check-every",
            "20",
            "--seed",
            "7",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    connections.close_all()  # this process's sessions died with the server
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads((out / "runtime_soak.json").read_text())
    assert report["faults"].get("pg_restart_immediate", 0) >= 1, report["faults"]
    assert len(set(report["faults"]) - {"kill_point_fired", "stop_point_fired", "armed_kill", "armed_stop"}) >= 4
    assert report["duplicates"] == {"t1": 0, "t2": 0} and not report["violations_final"]
    assert report["unended_after_drain"] == {} and report["checks_run"] >= 2
    started = report["started_total"]
    assert (
        started >= 20
        and report["workflows"].get("refund:completed", 0) + report["workflows"].get("soak_steps:completed", 0)
        == started
    ), report["workflows"]
    md = (out / "runtime_soak.md").read_text()
    assert "## Faults injected" in md and "pg_restart_immediate" in md
    assert (out / "runtime_soak.png").stat().st_size > 5_000
