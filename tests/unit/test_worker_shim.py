"""The harness's worker shim (prove/harness/worker_shim.py), in a fresh interpreter: every system's
worker process loads the model SDK before it reports ready, so the SDK's first import never falls
inside a timed attempt (Temporal's start_to_close on the decide activity)."""

from __future__ import annotations

import subprocess
import sys

from tests.support import ROOT

PROBE = """
import sys
from prove.harness import worker_shim
before = "anthropic" in sys.modules
worker_shim.install()
print(before, "anthropic" in sys.modules)
"""


def test_install_loads_the_model_sdk_before_the_worker_is_ready():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert out == ["False", "True"], out
