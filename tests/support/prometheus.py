"""A real Prometheus server (Debian's ``prometheus`` package; .ci/run installs it) for a test:
started on a free port with its own storage, scraping the given targets, stopped at exit."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from prove.peers.pg_cluster import free_port
from tests.support.waits import wait_for


def binary() -> str:
    """The prometheus executable; the test fails under CI without it and skips elsewhere."""
    import os

    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("prometheus is not installed (.ci/run installs Debian's package)")
        pytest.skip("prometheus is not installed (apt-get install prometheus)")
    return found


@contextlib.contextmanager
def prometheus_server(tmp_path: Path, targets: list[str], interval: str = "200ms"):
    """Run Prometheus scraping ``targets`` (host:port, path /metrics) every ``interval``;
    yields its base URL. Its log is tmp_path/prometheus.log."""
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n"
        f"  scrape_interval: {interval}\n"
        f"  scrape_timeout: {interval}\n"
        "scrape_configs:\n"
        "  - job_name: interlock\n"
        "    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n"
    )
    log = open(tmp_path / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [
            binary(),
            f"--config.file={config}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready():
            if proc.poll() is not None:
                raise AssertionError(
                    f"prometheus exited {proc.returncode}: {(tmp_path / 'prometheus.log').read_text()}"
                )
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                    return answer.status == 200
            except OSError:
                return False

        wait_for(ready, timeout=30, interval=0.1, message="prometheus ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def query(url: str, promql: str) -> list[dict]:
    """The result vector of an instant PromQL query over Prometheus's HTTP API."""
    with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": promql}), timeout=5) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


def targets_up(url: str) -> bool:
    """Whether every target's last scrape succeeded."""
    with urllib.request.urlopen(f"{url}/api/v1/targets", timeout=5) as r:
        active = json.load(r)["data"]["activeTargets"]
    return bool(active) and all(t["health"] == "up" for t in active)
