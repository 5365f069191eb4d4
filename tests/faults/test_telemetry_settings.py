"""ILR_TELEMETRY and ``--metrics-port`` from a user's shell (issue 46): a setting of the wrong
shape, or one that needs the SDK where the ``telemetry`` extra is missing, is named by
``manage.py check`` (ilr.E002) with the field and the rule, never a traceback; a bad
``--metrics-port`` is one CommandError line naming the flag (exit 2); and ``--metrics-port``
serves /metrics beside any other key of the setting."""

from __future__ import annotations

import subprocess
import sys
import urllib.request

import pytest

from prove.peers.pg_cluster import free_port
from tests.support import ROOT
from tests.support.waits import wait_for

GOOD = ("--id", "w1", "--import", "tests.support.flows")


def manage(workers, *args, env: dict | None = None):
    """``manage.py ARGS`` on the workers' environment, run to its exit."""
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=workers.env(env),
    )


@pytest.mark.parametrize(
    "setting, words",
    [
        ('"on"', ["ILR_TELEMETRY", "must be None or a dict", "got str"]),
        ("true", ["ILR_TELEMETRY", "must be None or a dict", "got bool"]),
        ('{"prometheus": "yes"}', ["ILR_TELEMETRY['prometheus']", "must be a bool, got 'yes'"]),
        ('{"spans_file": ""}', ["ILR_TELEMETRY['spans_file']", "must be a str (non-empty), got ''"]),
        ('{"bogus": 1}', ["ILR_TELEMETRY", "unknown key 'bogus'"]),
        # A spans file the process cannot append to (it was a traceback in every command).
        (
            '{"spans_file": "/no-such-ilr-dir/spans.jsonl"}',
            ["ILR_TELEMETRY['spans_file']", "'/no-such-ilr-dir' does not exist"],
        ),
        ('{"spans_file": "/"}', ["ILR_TELEMETRY['spans_file']", "must be a file", "directory '/'"]),
    ],
)
def test_a_bad_setting_is_named_by_the_check_not_a_traceback(workers, setting, words):
    proc = manage(workers, "check", env={"ILR_TELEMETRY": setting})
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    line = next(ln for ln in proc.stderr.splitlines() if "(ilr.E002)" in ln)
    for word in words:
        assert word in line, line


def test_the_check_names_an_sdk_key_without_the_telemetry_extra(workers, tmp_path):
    """EMULATED: the extra's absence. A sitecustomize on PYTHONPATH makes ``opentelemetry.sdk``
    unimportable (a meta path finder that refuses it), as in a venv without ``interlock[telemetry]``;
    the API, a core dependency, stays."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "class NoSdk:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'opentelemetry.sdk' or name.startswith('opentelemetry.sdk.'):\n"
        "            raise ImportError(f'No module named {name!r} (EMULATED: no telemetry extra)')\n"
        "sys.meta_path.insert(0, NoSdk())\n"
    )
    env = {"PYTHONPATH": str(tmp_path), "ILR_TELEMETRY": '{"prometheus": true}'}
    proc = manage(workers, "check", env=env)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    line = next(ln for ln in proc.stderr.splitlines() if "(ilr.E002)" in ln)
    assert "ILR_TELEMETRY" in line and "prometheus" in line, line
    assert "pip install 'interlock[telemetry]'" in line, line
    # Without an SDK key the check has nothing to say: the API alone is a no-op.
    proc = manage(workers, "check", env={**env, "ILR_TELEMETRY": '{"state_gauges": true}'})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("port", ["0", "70000", "-1"])
def test_a_metrics_port_out_of_range_is_one_line_naming_the_flag(workers, port):
    proc = manage(workers, "ilr_worker", *GOOD, "--metrics-port", port)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith("CommandError: --metrics-port: "), lines[0]
    assert "1 to 65535" in lines[0] and port in lines[0], lines[0]


@pytest.mark.parametrize(
    "setting", ['{"spans_memory": true}', '{"metrics_memory": true}', '{"sdk": true, "state_gauges": true}']
)
def test_the_metrics_port_serves_beside_any_other_sdk_key(rt, workers, setting):
    """A key that installs the SDK at the app's start (before the command reads --metrics-port)
    does not stop the endpoint: the worker serves the workflow it ran."""
    port = free_port()
    proc = workers.start("S", env={"ILR_TELEMETRY": setting}, args=("--metrics-port", str(port)))
    endpoint = f"http://127.0.0.1:{port}/metrics"

    def served():
        assert proc.poll() is None, workers.log("S")
        try:
            with urllib.request.urlopen(endpoint, timeout=2) as answer:
                return answer.read().decode()
        except OSError:
            return None

    wait_for(served, timeout=30, message="the worker's /metrics")
    rt.start("three_steps", "sdk-key-prom", {})
    assert rt.result("sdk-key-prom", timeout=30) == {"counts": [1, 1, 1]}
    ended = 'interlock_workflows_ended_total{name="three_steps"'
    wait_for(lambda: ended in (served() or ""), timeout=30, message="the ended counter served")
