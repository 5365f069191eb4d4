"""The test suite cleans up after itself: a test run that started the embedded PostgreSQL stops
it when the run ends, and leaves alone one that was running before (a developer's, a demo's)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import ROOT


def _inner_run(data_dir) -> subprocess.CompletedProcess:
    env = {**os.environ, "ILR_DATA_DIR": str(data_dir)}
    env.pop("DATABASE_URL", None)
    env.pop("ILR_DB_NAME", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/integration/test_schema.py::test_makemigrations_finds_nothing",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_run_that_started_the_cluster_stops_it_and_leaves_a_running_one_alone(tmp_path):
    from interlock_project.embedded_pg import EmbeddedPostgres

    cluster = EmbeddedPostgres(tmp_path / "data" / "pg")
    try:
        proc = _inner_run(tmp_path / "data")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert cluster.initialized(), "the inner run did not start the cluster at all"
        assert not cluster.running(), "the test run left its PostgreSQL running"
        cluster.start()
        proc = _inner_run(tmp_path / "data")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert cluster.running(), "the test run stopped a PostgreSQL it had not started"
    finally:
        if cluster.running():
            cluster.stop()
