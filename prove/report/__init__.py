"""The report writers: results/runtime_prove.md and .json with their plots (``runtime_prove``, the
Prove harness's report; its template is templates/runtime_prove.md)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
