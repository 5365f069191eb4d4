"""The serial gated effect in the current tree: ``prove.bench.floors.run_serial_effect`` (one
worker, concurrency 1, N ``bench_effect_timed`` workflows; each times a straight call of the target
and then its own ``ctx.effect`` call inside the worker process), against a local tier-1 target with
no service delay. Writes that function's result, with the command and the commit, to the path given.

usage (from the tree to measure, with ILR_DATA_DIR set): python effect_serial.py OUT.json [N]
"""

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "interlock_project.settings")

import django  # noqa: E402

django.setup()

from demo.peers.target import target_process  # noqa: E402
from demo.peers.targets_client import http_json  # noqa: E402
from prove.bench.floors import run_serial_effect  # noqa: E402

out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 300
ledger = Path(os.environ["ILR_DATA_DIR"]) / f"ledger-{time.time_ns()}.sqlite"
ledger.parent.mkdir(parents=True, exist_ok=True)
with target_process(tier=1, queryable=True, ledger=ledger) as url:
    for i in range(2 * n):
        http_json("POST", f"{url}/admin/payments", {"id": f"pay{i}", "paid": 1_000_000})
    result = run_serial_effect(url, n)
head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
result["commit"] = head.stdout.strip()
result["machine"] = f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"
result["command"] = f"python effect_serial.py OUT.json {n}"
Path(out).write_text(json.dumps(result, indent=2) + "\n")
print(json.dumps(result))
