"""``manage.py bench_agent_tools``: the overhead of a gated tool call over a plain tool call, per
agent framework (demo.agent_frameworks, FrameworkDriver.bench): results/agent_tools_bench.{md,json}.

Per framework, three variants of one agent run whose EMULATED model asks for one refund tool
call, then answers; interleaved one round at a time (the machine is shared):

- ``framework_plain``: the framework alone (no Interlock), in this process; the tool calls the
  payment target itself;
- ``durable_plain``: the same agent made durable (a workflow on an ``ilr_worker``), the tool still
  a plain tool (a recorded step);
- ``gated``: the same durable agent, the tool an Interlock effect tool (premises captured, a
  standing grant checked, the send journaled, re-checked and committed).

The figure of a run is the time from its first model request to its second (the tool call runs
in between, with the recording of the first response): the process clock for framework_plain,
the database clock (``ilr.llm_calls.started_at``) for the durable variants.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from demo.agent_frameworks import FrameworkDriver, load

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "agent_tools_bench.md"
BENCH_DB = "ilr_agent_tools_bench"
VARIANTS = ("framework_plain", "durable_plain", "gated")
WARMUP = 3


def _ms(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 2),
    }


class DurableRuns:
    """A fresh bench database, the payment target (tier 1) and one ``ilr_worker`` serving the
    framework's bench workflow; ``gap(variant, i)`` runs one workflow and returns its figure."""

    def __init__(self, module: str, workflow: str, version: str):
        self.module, self.workflow, self.version = module, workflow, version

    def __enter__(self):
        import importlib

        from demo.peers.target import target_process
        from ilr import Runtime
        from ilr import _db as db
        from prove.bench.core import fresh_database

        importlib.import_module(self.module)
        self.work = Path(tempfile.mkdtemp(prefix="agent-tools-bench-"))
        env = fresh_database(BENCH_DB)
        base = db.conninfo()
        dsn = base.replace(f"dbname={base.split('dbname=')[1].split()[0]}", f"dbname={BENCH_DB}")
        self.rt = Runtime(dsn)
        self._target = target_process(tier=1, queryable=True, ledger=self.work / "ledger.sqlite")
        self.url = self._target.__enter__()
        self.worker = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "ilr_worker",
                "--id",
                "bench-w1",
                "--import",
                self.module,
                "--only",
                f"{self.workflow}@{self.version}",
                "--poll",
                "0.05",
                "--concurrency",
                "1",
            ],
            cwd=ROOT,
            env=env,
            stdout=open(self.work / "worker.log", "wb"),
            stderr=subprocess.STDOUT,
        )
        self.grant = self.rt.grant("bench", "refund", 10_000_000, by="bench")
        return self

    def __exit__(self, *exc):
        if self.worker.poll() is None:
            self.worker.terminate()
            self.worker.wait(30)
        self._target.__exit__(*exc)
        self.rt.close()

    def input(self, variant: str, i: int) -> dict:
        from demo.peers.targets_client import http_json

        case = f"{variant}-{i}"
        payment = f"pay_{case}"
        assert http_json("POST", f"{self.url}/admin/payments", {"id": payment, "paid": 1_000_000})[0] in (200, 201)
        return {
            "variant": variant.split("_")[-1],
            "url": self.url,
            "payment": payment,
            "case_id": case,
            "grant": self.grant,
        }

    def check_committed(self, gated_runs: int) -> None:
        """Raise RuntimeError unless every gated run committed its effect (a refused send
        would make a gated figure measure a refusal)."""
        from prove.queries import AGENT_TOOLS_COMMITTED_EFFECTS

        n = self.rt.connection().execute(AGENT_TOOLS_COMMITTED_EFFECTS).fetchone()["n"]
        if n != gated_runs:
            raise RuntimeError(f"bench_agent_tools: {n} effects committed for {gated_runs} gated runs")

    def gap(self, variant: str, i: int) -> float:
        from prove.queries import AGENT_TOOLS_REQUEST_GAP

        input = self.input(variant, i)
        self.rt.start(self.workflow, input["case_id"], input, version=self.version)
        self.rt.result(input["case_id"], timeout=60, poll=0.01)
        row = self.rt.connection().execute(AGENT_TOOLS_REQUEST_GAP, (input["case_id"],)).fetchone()
        if row["n"] != 2:
            raise RuntimeError(f"bench_agent_tools: {input['case_id']} made {row['n']} model requests, not 2")
        return row["s"]


def pydantic_ai_bench(n: int, out) -> dict:
    """The three variants in Pydantic AI (prove.bench.agent_tools_flows.pyd_tool_bench)."""
    from prove.bench.agent_tools_flows import pydantic_ai_tool_agent

    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with DurableRuns("prove.bench.agent_tools_flows", "pyd_tool_bench", "1") as runs:

        def framework_plain(i: int) -> float:
            clock: list[float] = []
            agent = pydantic_ai_tool_agent(runs.input("framework_plain", i), durable=False, clock=clock)
            agent.run_sync("refund it")
            return clock[1] - clock[0]

        for i in range(n + WARMUP):
            # Rotate the order each round: no variant always runs first after a pause.
            order = VARIANTS[i % 3 :] + VARIANTS[: i % 3]
            for variant in order:
                s = framework_plain(i) if variant == "framework_plain" else runs.gap(variant, i)
                if i >= WARMUP:
                    samples[variant].append(s)
            if (i + 1) % 25 == 0:
                out.write(f"pydantic-ai: {i + 1 - WARMUP}/{n} rounds\n")
        runs.check_committed(n + WARMUP)
    return summarize(samples)


def summarize(samples: dict[str, list[float]]) -> dict:
    """Per variant {n, p50_ms, p90_ms, mean_ms}; the overheads of gated (p50 differences)."""
    figures = {v: _ms(s) for v, s in samples.items()}
    return {
        "variants": figures,
        "gated_over_framework_plain_p50_ms": round(
            figures["gated"]["p50_ms"] - figures["framework_plain"]["p50_ms"], 2
        ),
        "gated_over_durable_plain_p50_ms": round(figures["gated"]["p50_ms"] - figures["durable_plain"]["p50_ms"], 2),
    }


def run(drivers: list[FrameworkDriver], n: int, out=sys.stdout) -> dict:
    """Each driver's bench (FrameworkDriver.bench); drivers without one are listed as such."""
    frameworks = {}
    for d in drivers:
        if d.bench is None:
            frameworks[d.name] = {"title": d.title, "skipped": "no bench for this framework"}
            continue
        t0 = time.monotonic()
        frameworks[d.name] = {"title": d.title, **load(d.bench)(n, out), "seconds": round(time.monotonic() - t0, 1)}
    return {"frameworks": frameworks, "n": n}


def write_results(report: dict, command: str) -> Path:
    """results/agent_tools_bench.{json,md}; returns the .md path."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    report = {
        **report,
        "command": command,
        "commit": (commit or "unknown") + ("+uncommitted" if dirty else ""),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end",
    }
    RESULTS.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [
        "# Agent tools: a gated tool call over a plain one",
        "",
        f"Command: `{command}` (commit {report['commit']}, {report['machine']}). "
        "Generated by prove/bench/agent_tools.py.",
        "",
        (
            "Per framework, one agent run whose EMULATED model asks for one refund tool call, then answers; "
            f"{report['n']} rounds (after {WARMUP} warm-up rounds), the three variants interleaved in rotating "
            "order. The figure of a run is the time from its first model request to its second: the tool call "
            "runs in between. `framework_plain`: the framework alone, the tool calls the payment target itself "
            "(process clock). `durable_plain`: the same agent as an Interlock workflow on one `ilr_worker`, the "
            "tool a plain tool (a recorded step). `gated`: the tool an Interlock effect tool (premises captured, "
            "a standing grant checked, the send journaled, premises re-checked, committed) (database clock)."
        ),
        "",
    ]
    for f in report["frameworks"].values():
        lines += [f"## {f['title']}", ""]
        if "skipped" in f:
            lines += [f"Skipped: {f['skipped']}.", ""]
            continue
        lines += ["| variant | runs | p50 ms | p90 ms | mean ms |", "|---|---|---|---|---|"]
        for v, fig in f["variants"].items():
            lines.append(f"| {v} | {fig['n']} | {fig['p50_ms']} | {fig['p90_ms']} | {fig['mean_ms']} |")
        lines += [
            "",
            (
                f"Overhead of the gated tool call (p50): {f['gated_over_framework_plain_p50_ms']} ms over the "
                f"framework's plain tool call, {f['gated_over_durable_plain_p50_ms']} ms over a durable plain tool "
                f"call. {f['seconds']} s."
            ),
            "",
        ]
    RESULTS.write_text("\n".join(lines) + "\n")
    return RESULTS
