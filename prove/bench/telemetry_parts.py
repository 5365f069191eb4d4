"""The CPU of each telemetry call one workflow makes, in one process (issue 46).

``python -m prove.bench.telemetry_parts [--n N]``: the OpenTelemetry SDK as ILR_TELEMETRY
{"spans_memory": true, "metrics_memory": true} installs it in a worker (``setup.configure``), then
N times each call the engine's hooks make per workflow, timed by the process's CPU clock: a span
started and ended (with no attribute, with one, dropped by its sampler), a histogram record, a counter add, a span id,
and the whole set of hooks of one 4-step workflow (``hooks.run_started``, four ``hooks.step``
blocks, ``hooks.workflow_ended``, ``hooks.run_ended``). No database and no worker threads: this is
the floor of what telemetry adds to a worker's CPU per workflow, which
results/telemetry_bench.md measures in the real workers.

Written to results/telemetry_parts.md.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class _Run:
    """The fields of a claim (``ilr._worker.claims.Run``) that the hooks read."""

    def __init__(self, i: int):
        self.workflow_id, self.name, self.version, self.epoch = f"wf-{i}", "bench_steps4", "1", 1
        self.took_over, self.takeovers, self.parent_id, self.born_at = False, 0, None, None
        self.trace_context, self.trace_parent, self.span = None, False, None


def _one_workflow(i: int) -> None:
    from ilr._telemetry import hooks

    run = _Run(i)
    hooks.run_started(run, "w1", 0.01)
    for seq in range(1, 5):
        with hooks.step(run, seq, "step", f"s{seq}", 1):
            pass
    hooks.workflow_ended(run, "completed")
    hooks.run_ended(run, "completed")


def _cpu_us(call, n: int) -> float:
    for i in range(min(n, 500)):  # warm
        call(i)
    t0 = time.process_time()
    for i in range(n):
        call(i)
    return round((time.process_time() - t0) / n * 1e6, 1)


def measure(n: int) -> list[tuple[str, float]]:
    """[(what, CPU µs per call)], the SDK installed as a worker installs it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    from ilr._telemetry import ids, metrics, setup, tracing

    setup.configure({"spans_memory": True, "metrics_memory": True})
    tracer = tracing._tracer
    unsampled = TracerProvider(sampler=ALWAYS_OFF).get_tracer("interlock")
    rows = [
        ("a span started and ended, no attribute", _cpu_us(lambda i: tracer.start_span("x").end(), n)),
        (
            "a span started and ended, one attribute",
            _cpu_us(lambda i: tracer.start_span("x", attributes={"a": i}).end(), n),
        ),
        (
            "a span its sampler drops (ALWAYS_OFF), one attribute",
            _cpu_us(lambda i: unsampled.start_span("x", attributes={"a": i}).end(), n),
        ),
        (
            "a histogram record, two attributes",
            _cpu_us(lambda i: metrics.step_duration.record(0.01, {"kind": "step", "outcome": "ok"}), n),
        ),
        (
            "a counter add, three attributes",
            _cpu_us(lambda i: metrics.runs.add(1, {"name": "a", "version": "1", "outcome": "completed"}), n),
        ),
        ("a derived span id (ids.span_id_for)", _cpu_us(lambda i: ids.span_id_for("step", "wf-1", i, 1), n)),
        (
            "the hooks of one 4-step workflow (6 spans, 7 metric records)",
            _cpu_us(_one_workflow, n),
        ),
    ]
    setup.memory_spans()  # flush: the exporter's work is the process's too
    return rows


def write(rows: list[tuple[str, float]], n: int, command: str) -> Path:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    from importlib.metadata import version

    lines = [
        "# The CPU of each telemetry call (issue 46)",
        "",
        f"Command: `{command}`",
        "",
        f"Commit {commit.strip()}; Python {platform.python_version()}, opentelemetry-sdk "
        f"{version('opentelemetry-sdk')}; {n} calls of each, one thread, no database (prove/bench/telemetry_parts.py).",
        "",
        "| call | CPU µs per call |",
        "|---|---|",
        *(f"| {what} | {us} |" for what, us in rows),
        "",
    ]
    out = ROOT / "results" / "telemetry_parts.md"
    out.write_text("\n".join(lines))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    rows = measure(args.n)
    print(write(rows, args.n, "python -m prove.bench.telemetry_parts" + (f" --n {args.n}" if argv else "")))


if __name__ == "__main__":
    main(sys.argv[1:] or None)
