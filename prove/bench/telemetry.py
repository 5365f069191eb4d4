"""``manage.py bench --telemetry``: the cost of spans and metrics (issue 46).

N 4-step workflows (``bench_steps4``, prove/bench/full_flows.py) over W ``ilr_worker`` processes x
concurrency C, each run ``prove.bench.full_measure.run_runtime`` (a fresh database, fresh
workers, the main bench's figures), with telemetry off (no ILR_TELEMETRY: the engine's hooks are
off) and on (ILR_TELEMETRY = {"spans_memory": true, "metrics_memory": true}: the OpenTelemetry SDK
in every worker, every span exported to an in-memory exporter behind a BatchSpanProcessor, every
metric recorded for an in-memory reader). Rounds alternate the order (off, on / on, off) so that
a drift of the shared machine falls on both; the target (on/off >= 0.9) is read from the
medians. Each "on" worker says at exit how many spans its exporter holds: the run counts as on
only if the workers' spans cover every workflow (a run span, a workflow span and four step spans
each).

Written to results/telemetry_bench.{md,json}.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time

from prove.bench.full_measure import ROOT, run_runtime
from prove.bench.tasks_run import busy_cores, machine_facts

SHAPE = "bench_steps4"
TARGET_RATIO = 0.9
ON = {"ILR_TELEMETRY": json.dumps({"spans_memory": True, "metrics_memory": True})}
OFF: dict = {}  # and no ILR_TELEMETRY inherited (run() drops it from this process's environment)
SPANS_LINE = re.compile(r"telemetry: (\d+) spans in memory")
SPANS_PER_WORKFLOW = 6  # a workflow span, one run span, four step spans
KEPT = (
    "n",
    "failed",
    "takeovers",
    "wall_s",
    "workflows_per_s",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "durable_call_p50_ms",
    "worker_cpu_s_per_workflow",
    "postgres_cpu_s_per_workflow",
    "machine_busy_cores",
    "other_busy_cores",
)


def _spans(workers: int) -> int | None:
    """The spans the last run's workers said they held (None: no worker said)."""
    counts = []
    for w in range(workers):
        text = (ROOT / ".data" / "bench" / f"{SHAPE}-{w}.log").read_text(errors="replace")
        found = SPANS_LINE.search(text)
        if found:
            counts.append(int(found[1]))
    return sum(counts) if counts else None


def run(n: int, workers: int, concurrency: int, rounds: int, command: str, out=sys.stdout) -> dict:
    """The whole bench; returns the report (written by ``write``)."""
    say = lambda s: (out.write(s + "\n"), out.flush())  # noqa: E731
    os.environ.pop("ILR_TELEMETRY", None)
    started = time.monotonic()
    say("the machine before the run (3 s) ...")
    report: dict = {
        "command": command,
        "params": {"n": n, "workers": workers, "concurrency": concurrency, "rounds": rounds, "shape": SHAPE},
        "machine": machine_facts(),
        "busy_cores_before": busy_cores(),
        "rounds": [],
    }
    for r in range(rounds):
        order = ("off", "on") if r % 2 == 0 else ("on", "off")
        one: dict = {"order": list(order)}
        for mode in order:
            say(f"round {r + 1}/{rounds}: telemetry {mode} ...")
            figures = run_runtime(SHAPE, n, workers, concurrency, ON if mode == "on" else OFF, lambda i, g: {})
            kept = {k: figures[k] for k in KEPT}
            kept["spans"] = _spans(workers)
            if mode == "on" and (kept["spans"] or 0) < n * SPANS_PER_WORKFLOW:
                raise RuntimeError(f"telemetry on, but the workers hold {kept['spans']} spans for {n} workflows")
            if mode == "off" and kept["spans"] is not None:
                raise RuntimeError("telemetry off, but a worker holds spans")
            if kept["failed"]:
                raise RuntimeError(f"{kept['failed']} workflows did not complete: {figures['failures']}")
            one[mode] = kept
            say(f"  {kept['workflows_per_s']} wf/s, spans {kept['spans']}, other busy {kept['other_busy_cores']}")
        one["ratio"] = round(one["on"]["workflows_per_s"] / one["off"]["workflows_per_s"], 3)
        report["rounds"].append(one)
    on = [r["on"]["workflows_per_s"] for r in report["rounds"]]
    off = [r["off"]["workflows_per_s"] for r in report["rounds"]]
    ratio = round(statistics.median(on) / statistics.median(off), 3)
    report["summary"] = {
        "on_wf_s_median": round(statistics.median(on), 1),
        "off_wf_s_median": round(statistics.median(off), 1),
        "ratio": ratio,
        "ratio_by_round": [r["ratio"] for r in report["rounds"]],
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio >= TARGET_RATIO,
        "worker_cpu_s_per_workflow_on_median": round(
            statistics.median(r["on"]["worker_cpu_s_per_workflow"] for r in report["rounds"]), 5
        ),
        "worker_cpu_s_per_workflow_off_median": round(
            statistics.median(r["off"]["worker_cpu_s_per_workflow"] for r in report["rounds"]), 5
        ),
    }
    report["elapsed_s"] = round(time.monotonic() - started, 1)
    return report


def write(report: dict, out_dir=None) -> str:
    """results/telemetry_bench.{md,json} (or ``out_dir``); returns the markdown's path."""
    target = out_dir or (ROOT / "results")
    target.mkdir(parents=True, exist_ok=True)
    (target / "telemetry_bench.json").write_text(json.dumps(report, indent=2) + "\n")
    s, p, m = report["summary"], report["params"], report["machine"]
    lines = [
        "# Telemetry benchmark (issue 46)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"{p['n']} four-step workflows (`{p['shape']}`, no-op steps) per run over {p['workers']} `ilr_worker` "
        f"processes x concurrency {p['concurrency']}, each run on a fresh database with fresh workers "
        "(prove/bench/full_measure.py's run_runtime). Off: no ILR_TELEMETRY (the engine's hooks are off). "
        'On: ILR_TELEMETRY = {"spans_memory": true, "metrics_memory": true}: the OpenTelemetry SDK in every '
        "worker, every span (a workflow span, a run span, four step spans per workflow) exported to an "
        "in-memory exporter behind a BatchSpanProcessor, every metric recorded. Rounds alternate the order. "
        "The machine is shared: `other_busy_cores` is what else ran meanwhile.",
        "",
        f"Machine: {m.get('cpu_model')}, {m.get('nproc')} cores, {m.get('memory')}, Python {m.get('python')}, "
        f"PostgreSQL {m.get('postgresql')}, commit {m.get('interlock_commit')}; busy cores before the run: "
        f"{report['busy_cores_before']}.",
        "",
        "| figure | value |",
        "|---|---|",
        f"| on, median wf/s | {s['on_wf_s_median']} |",
        f"| off, median wf/s | {s['off_wf_s_median']} |",
        f"| on/off (medians) | {s['ratio']} |",
        f"| on/off by round | {', '.join(str(x) for x in s['ratio_by_round'])} |",
        f"| target | >= {s['target_ratio']}: {'met' if s['meets_target'] else 'NOT met'} |",
        f"| worker CPU s per workflow, on / off | {s['worker_cpu_s_per_workflow_on_median']} / "
        f"{s['worker_cpu_s_per_workflow_off_median']} |",
        "",
        "| round | order | mode | wf/s | e2e p50 ms | e2e p99 ms | worker CPU s/wf | spans | other busy cores |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(report["rounds"], 1):
        for mode in r["order"]:
            f = r[mode]
            lines.append(
                f"| {i} | {'/'.join(r['order'])} | {mode} | {f['workflows_per_s']} | {f['e2e_p50_ms']} | "
                f"{f['e2e_p99_ms']} | {f['worker_cpu_s_per_workflow']} | {f['spans']} | {f['other_busy_cores']} |"
            )
    lines += ["", f"Elapsed: {report['elapsed_s']} s."]
    path = target / "telemetry_bench.md"
    path.write_text("\n".join(lines) + "\n")
    return str(path)
