"""The report of ``manage.py bench`` (prove/bench/full.py): results/runtime_bench.md, .json and
the latency PNG, from the report dict ``run`` builds."""

from __future__ import annotations

import json
from pathlib import Path

from prove.bench.core import ROOT
from prove.bench.full_measure import BENCH_LEASE_TTL, LABEL, TARGET_DELAY_S


def write(report: dict, out_dir: Path | None = None) -> None:
    results = Path(out_dir) if out_dir is not None else ROOT / "results"
    results.mkdir(parents=True, exist_ok=True)

    def without_samples(v):
        # The latency samples go to the PNG, not the JSON.
        if isinstance(v, dict):
            return {kk: without_samples(vv) for kk, vv in v.items() if kk != "e2e_ms"}
        if isinstance(v, list):
            return [without_samples(x) for x in v]
        return v

    slim = without_samples(report)
    (results / "runtime_bench.json").write_text(json.dumps(slim, indent=2) + "\n")
    _plot(report, results / "runtime_bench_latency.png")
    rows = []
    for key in ("runtime_steps4", "temporal_steps4", "dbos_steps4", "runtime_refund", "temporal_refund", "dbos_refund"):
        r = report[key]
        system = r["system"] + (f" ({r['processes']} processes)" if r["system"] == "dbos" else "")
        rows.append(
            f"| {system} | {r['shape']} | {r['workflows_per_s']} | {r['e2e_p50_ms']} | "
            f"{r['e2e_p99_ms']} | "
            f"{r.get('durable_call_p50_ms', '')} | {r.get('commits_per_workflow', '')} | "
            f"{r.get('postgres_cpu_s_per_workflow', '')} | {r.get('worker_peak_rss_mb', '')} | "
            f"{r.get('machine_busy_cores', '')} | {r.get('workflows_per_s_per_busy_core', '')} |"
        )
    s = report["scale"]
    rounds = len(report.get("round_results", [])) or 1
    median = f" (median of {rounds} rounds)" if rounds > 1 else ""
    lines = [
        "# Runtime benchmark",
        "",
        f"Command: `{report['command']}` (wall time {report['wall_s']} s).",
        "",
        f"**{LABEL}.** {report['machine']}; N = {report['n']} workflows per shape over {report['workers']} "
        f"workers x concurrency {report['concurrency']}; Temporal {report.get('temporal_version', '?')}; DBOS Transact "
        f"{report.get('dbos_version', '?')} (its own database on the same PostgreSQL). The target "
        f"has a fixed {int(TARGET_DELAY_S * 1000)} ms service delay; the model is the local stub (EMULATED model).",
        "",
        "| system | shape | workflows/s | e2e p50 ms | e2e p99 ms | durable call p50 ms | commits/wf | "
        "PG CPU s/wf | worker peak RSS MB | busy cores | wf/s per busy core |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        "Commits per workflow are PostgreSQL's (pg_stat_database.xact_commit of the system's database): "
        "Temporal's dev server keeps its state in SQLite, so it has none here. Busy cores: /proc/stat over the "
        "run, every process and the kernel.",
        "",
        *_dbos_lines(report),
        "## Ratios and targets",
        "",
        "| figure | measured | target |",
        "|---|---|---|",
        f"| runtime / Temporal, 4-step throughput (`ratio_vs_temporal`) | {report['ratio_vs_temporal']} | >= 40 |",
        f"| runtime / Temporal, refund shape | {report['ratio_vs_temporal_refund']} | |",
        f"| runtime / DBOS, 4-step throughput (`ratio_vs_dbos`, DBOS's best process count) | "
        f"{report['ratio_vs_dbos']} | >= 10 |",
        *_ceiling_rows(report),
        f"| runtime / DBOS, refund shape | {report['ratio_vs_dbos_refund']} | |",
        f"| runtime serial p50 / DBOS serial p50, 4 steps (`serial_p50_vs_dbos`) | {report['serial_p50_vs_dbos']} "
        f"({report['runtime_serial']['serial_p50_ms']} ms / {report['dbos_serial']['serial_p50_ms']} ms) | <= 0.333 |",
        f"| (wf/s x commits/wf) / pgbench tps (`ratio_vs_commit_bound`){median} | {report['ratio_vs_commit_bound']} "
        "| >= 0.5 |",
        f"| serial p50, 4 steps (ms) | {report['runtime_serial']['serial_p50_ms']} | <= 15 |",
        f"| gated effect over the target's own latency, p50 (ms), one at a time{median} | "
        f"{report['effect_overhead_p50_ms']} | <= 3 |",
        f"| the same under load (concurrency {report['concurrency']} x {report['workers']} workers, against the "
        f"target's handler time) | {report.get('effect_overhead_loaded_p50_ms')} | |",
        f"| worker peak RSS (MB) at concurrency {report['concurrency']} | "
        f"{report['runtime_steps4']['worker_peak_rss_mb']} | <= 150 at concurrency 16 |",
        f"| pgbench -N tps at {report['pgbench']['clients']} clients | {report['pgbench']['tps']} | |",
        "",
        *_ceiling_lines(report),
        *_serial_phase_lines(report),
        *_rounds_lines(report),
        f"Worst heartbeat gap: {_gap_sentence(report)}",
        "",
        f"Outcomes: {_outcome_sentence(report)}",
        "",
        f"Gated effect, one at a time ({report['runtime_serial_effect']['n']} refunds, one worker, concurrency 1): "
        f"the ctx.effect call p50 {report['runtime_serial_effect']['effect_p50_ms']} ms against "
        f"{report['runtime_serial_effect']['direct_call_p50_ms']} ms for a straight call of the target by the same "
        "client code in the same worker process, both timed there; the difference is T_dispatch, the watchdog, the "
        "response log and T_commit. "
        "Under load the figure also holds queueing at the single-process target.",
        "",
        *_wake_floor_lines(report),
        *_profile_lines(report),
        "Where the time goes (4-step shape): worker CPU "
        f"{report['runtime_steps4'].get('worker_cpu_s_per_workflow')} s/workflow (Python: the workers and their "
        f"psycopg clients) against PostgreSQL CPU {report['runtime_steps4']['postgres_cpu_s_per_workflow']} "
        f"s/workflow, with {report['runtime_steps4']['commits_per_workflow']} commits per workflow; the two share "
        f"the machine's two cores, of which {report['runtime_steps4'].get('machine_busy_cores')} were busy during the "
        "run (/proc/stat: every process and the kernel).",
        "",
        "## Scale: the claim with a large history",
        "",
        f"{s['finished']} completed and {s['sleeping']} sleeping workflows in the table. Each claim below is the "
        "worker's own claim transaction (ilr._worker.worker.claim_due: the claim and the step rows of what it took, "
        "prepared, one round trip). The claim with nothing "
        f"due takes p50 {s['claim_nothing_due_p50_ms']} ms, p99 {s['claim_nothing_due_p99_ms']} ms. Claiming 2000 due "
        f"workflows in batches of {s.get('claim_batch')} (each batch then finished) runs at "
        f"{s.get('claims_per_s_with_history')} workflows/s with that history against "
        f"{s.get('claims_per_s_empty_table')} on the empty table, and at {s.get('claims_per_s_due_backlog')} with "
        f"{s.get('due_backlog')} workflows due at once (the claim reads the rows it takes, not the backlog). Its plan "
        "(EXPLAIN ANALYZE of one claim of a due workflow, rolled back):",
        "",
        "```",
        *s["explain"],
        "```",
        "",
        "![latency distributions](runtime_bench_latency.png)",
        "",
    ]
    (results / "runtime_bench.md").write_text("\n".join(lines) + "\n")


def _dbos_lines(report: dict) -> list[str]:
    """DBOS's configuration and its 4-step figure by process count."""
    lines = [
        "## DBOS Transact",
        "",
        "Configured as DBOS documents for a Postgres deployment: `DBOSConfig` with `system_database_url` "
        "(its own database, `ilr_bench_dbos`, on this cluster), a unique `executor_id` per process, "
        "`sys_db_pool_size` = threads + 4 (a connection per workflow thread), the admin server off. Each "
        'process starts its share of the workflows locally (DBOS\'s "start workflows locally" workload: the '
        "process that starts a workflow runs it, every step checkpointed in the system database) on "
        f"{report['concurrency']} threads that each call the workflow function. Latency is on the database "
        "clock (workflow_status.updated_at - created_at), as the runtime's. The workflows: "
        "prove/bench/dbos_flows.py.",
        "",
        "| DBOS processes | 4-step wf/s | e2e p50 ms | e2e p99 ms | commits/wf | busy cores | "
        "wf/s per busy core | failed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report.get("dbos_steps4_by_processes", []):
        lines.append(
            f"| {r['processes']} | {r['workflows_per_s']} | {r['e2e_p50_ms']} | {r['e2e_p99_ms']} | "
            f"{r['commits_per_workflow']} | {r['machine_busy_cores']} | "
            f"{r['workflows_per_s_per_busy_core']} | {r['failed']} |"
        )
    serial = report.get("dbos_serial", {})
    lines += [
        "",
        f"Serial (one process, one thread, {serial.get('n')} workflows): p50 "
        f"{serial.get('serial_p50_ms')} ms on the database clock ({serial.get('client_p50_ms')} ms as "
        "the calling thread saw it).",
        "",
    ]
    return lines


def _rounds_lines(report: dict) -> list[str]:
    results = report.get("round_results", [])
    if len(results) < 2:
        return []
    lines = [
        f"## The {len(results)} rounds",
        "",
        "Each round runs the 4-step shape, then pgbench at the same client count, then the serial gated "
        "effect, so a ratio compares figures taken minutes apart at most. The 4-step row of the table above "
        "is the median round by `ratio_vs_commit_bound`. The last column is this machine's wake floor, "
        "measured right after the round's gated effects: a one-row commit after an idle wait as long as the "
        "target's delay (the wait T_commit follows). The column before it is the same serial gated effect "
        "against the target with no service delay (no idle wait before T_commit): not a target figure, the "
        "effect's cost on this machine without the idle wait.",
        "",
        "| round | 4-step wf/s | commits/wf | PG CPU s/wf | worker CPU s/wf | busy cores | pgbench tps | "
        "ratio vs commit bound | effect p50 ms | direct call p50 ms | effect overhead ms | "
        "overhead, no delay ms | commit after idle ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(results, 1):
        s4, se = r["runtime_steps4"], r["runtime_serial_effect"]
        lines.append(
            f"| {k} | {s4['workflows_per_s']} | {s4['commits_per_workflow']} | "
            f"{s4['postgres_cpu_s_per_workflow']} | {s4.get('worker_cpu_s_per_workflow')} | "
            f"{s4.get('machine_busy_cores')} | {r['pgbench']['tps']} | {r['ratio_vs_commit_bound']} | "
            f"{se['effect_p50_ms']} | {se['direct_call_p50_ms']} | {r['effect_overhead_p50_ms']} | "
            f"{r.get('runtime_serial_effect_no_delay', {}).get('overhead_p50_ms', '')} | "
            f"{r.get('wake_floor', {}).get('commit_after_idle_p50_ms', '')} |"
        )
    ratios = sorted(r["ratio_vs_commit_bound"] for r in results)
    effects = sorted(r["effect_overhead_p50_ms"] for r in results)
    lines += [
        "",
        f"Commit-bound ratio: range {ratios[0]} to {ratios[-1]}, "
        f"{sum(x >= 0.5 for x in ratios)} of {len(ratios)} rounds at or above 0.5. "
        f"Gated effect overhead: range {effects[0]} to {effects[-1]} ms, "
        f"{sum(x <= 3 for x in effects)} of {len(effects)} rounds at or below 3 ms.",
        "",
    ]
    return lines


def _wake_floor_lines(report: dict) -> list[str]:
    w = report.get("wake_floor")
    if not w:
        return []
    return [
        f"The machine after an idle wait ({w['n']} of each, one psycopg connection from the bench process): "
        f"`select 1` takes p50 {w['select1_hot_p50_ms']} ms back to back and {w['select1_after_idle_p50_ms']} ms "
        f"after {w['idle_ms']} ms idle; a one-row INSERT in autocommit (one round trip, one WAL flush) takes "
        f"{w['commit_hot_p50_ms']} ms back to back and {w['commit_after_idle_p50_ms']} ms after the same idle "
        "wait. A gated effect commits twice (T_dispatch before the send, T_commit after it), each after a "
        "round trip that reads what its entries seal, and T_commit starts right after the send's idle wait.",
        "",
    ]


def _outcome_sentence(report: dict) -> str:
    """Failures, takeovers and the refund shape's effect statuses, in one sentence."""
    parts = []
    for key in ("runtime_steps4", "runtime_refund"):
        r = report[key]
        text = f"{r['shape']}: {r['failed']} failed, {r.get('takeovers', 0)} takeovers"
        if r.get("effect_statuses"):
            text += " (effects: " + ", ".join(f"{n} {status}" for status, n in r["effect_statuses"].items()) + ")"
        parts.append(text)
    return "; ".join(parts) + "."


def _gap_sentence(report: dict) -> str:
    parts = []
    for key in ("runtime_steps4", "runtime_refund"):
        r = report[key]
        if not r.get("worst_heartbeat_gap_s"):
            parts.append(
                f"{r['shape']}: no two consecutive heartbeats during the run ({r.get('heartbeats', 0)} "
                "in all; its fenced writes renewed the lease)"
            )
        else:
            parts.append(
                f"{r['shape']}: {r['worst_heartbeat_gap_s']} s over {r['heartbeats']} heartbeats "
                f"(schedule every {r['heartbeat_schedule_s']} s, lease {BENCH_LEASE_TTL} s)"
            )
    return "; ".join(parts) + "."


def _profile_lines(report: dict) -> list[str]:
    prof = report.get("profile_steps4")
    if not prof:
        return ["CPU profile: not taken (py-spy missing).", ""]
    rounds = len(report.get("round_results", [])) or 1
    lines = [
        "## Where a worker's CPU goes (4-step shape"
        + (", round 1" if rounds > 1 else "")
        + ", py-spy --gil on worker 0: the thread holding the GIL)",
        "",
        f"{prof['samples']} samples.",
        "",
        "| group (by leaf frame) | share |",
        "|---|---|",
    ]
    lines += [f"| {g} | {share} |" for g, share in prof["groups"]]
    lines += ["", "| leaf function | share |", "|---|---|"]
    lines += [f"| `{f}` | {share} |" for f, share in prof["top_self"]]
    return lines + [""]


def _plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, shape in zip(axes, ("steps4", "refund")):
        for system in ("runtime", "temporal", "dbos"):
            r = report[f"{system}_{shape}"]
            ax.hist(r["e2e_ms"], bins=40, alpha=0.6, label=f"{system} ({r['workflows_per_s']} wf/s)")
        ax.set_title(f"{shape}: end-to-end latency, N={report['n']}")
        ax.set_xlabel("ms (all N started at once: includes queueing)")
        ax.legend()
    fig.suptitle(LABEL, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _ceiling_rows(report: dict) -> list[str]:
    c = report.get("dbos_ceiling")
    if not c:
        return []
    return [
        "| runtime / DBOS, 4-step throughput with every core busy at the runtime's measured CPU per workflow "
        f"(`dbos_ceiling`) | "
        f"{c['ceiling_ratio']} ({c['ceiling_wf_s']} wf/s) | |"
    ]


def _ceiling_lines(report: dict) -> list[str]:
    c = report.get("dbos_ceiling")
    if not c:
        return []
    return [
        "What this machine allows against DBOS: the runtime's 4-step shape used "
        f"{c['runtime_cpu_ms_per_wf']} ms of machine CPU per workflow (busy cores / wf/s: PostgreSQL, the workers "
        "and the kernel). With every core busy at that cost it would run "
        f"{c['ceiling_wf_s']} wf/s, {c['ceiling_ratio']} x DBOS's best; {c['target']:g} x DBOS needs at most "
        f"{c['budget_cpu_ms_per_wf']} ms per workflow.",
        "",
    ]


def _serial_phase_lines(report: dict) -> list[str]:
    phases = report["runtime_serial"].get("phases_p50_ms")
    if not phases:
        return []
    return [
        "Where the serial 4 steps' time goes (p50 of each phase, database clock: each stamp is a transaction's "
        "now(), its start): "
        + "; ".join(f"{name} {ms} ms" for name, ms in phases.items())
        + ". Each phase ends with a transaction's round trip and commit; the first two also hold a wakeup after "
        "an idle wait (the client's start, then the worker's claim).",
        "",
    ]
