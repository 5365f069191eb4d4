"""Write summary.md from the <side>_<tag><round>.json files here: python summarize.py"""

import glob
import json
import statistics as st

rows = []
for side in ("before", "now"):
    xs = [json.load(open(f)) for f in sorted(glob.glob(f"{side}_x*.json"))]
    wfs = [x["workflows_per_s"] for x in xs]
    commits = st.median(x["commits_per_workflow"] for x in xs)
    rows.append(f"- {side}: {wfs}, median {st.median(wfs):.1f} wf/s, commits/wf {commits}")
lines = [
    "# A/B of the hot path: this session's start (9024a1e) against the merged main (a394ac5)",
    "",
    "Each run: `python manage.py bench --core --n 5000 --workers 2 --concurrency 16` in its own worktree and data",
    "directory, the two alternating (`bash run.sh x 2 before now`; run.sh is here), the machine quiet (the",
    "helpers had stopped). now = a394ac5: the trace context column on the claim (migration 0023), the effect call",
    "by composition (results/ab_compose_1206), cancel_running under the key's lock, the tests' door. Figures:",
    "workflows_per_s of each run's results/runtime_bench_core.json, copied here; this file is written by",
    "`python summarize.py`.",
    "",
    *rows,
    "",
    "Reading: the medians differ by less than either side's spread: the hot path is unchanged within this",
    "bench's noise.",
]
open("summary.md", "w").write("\n".join(lines) + "\n")
