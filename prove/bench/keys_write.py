"""The report of ``manage.py bench --keys`` (prove/bench/keys.py): results/keys_bench.md and .json,
from the report dict ``run`` builds."""

from __future__ import annotations

import json
from pathlib import Path

from prove.bench.core import ROOT
from prove.bench.full_measure import LABEL


def write(report: dict, out_dir: Path | None = None) -> Path:
    """Write keys_bench.json and keys_bench.md to ``out_dir`` (default results/); returns the .md."""
    results = Path(out_dir) if out_dir is not None else ROOT / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "keys_bench.json").write_text(json.dumps(report, indent=2) + "\n")
    p, m, s = report["params"], report["machine"], report["summary"]
    t = s["targets"]
    lines = [
        "# Concurrency keys under load (issue 42)",
        "",
        f"Command: `{report['command']}` (wall time {report['wall_s']} s), at commit {m['interlock_commit']}.",
        "",
        f"**{LABEL.split(';')[0]}.** {m['cpu_model']}, {m['nproc']} cores, {m['memory']}; Linux {m['kernel']}; "
        f"Python {m['python']}, PostgreSQL {m['postgresql']} (embedded, Unix socket, fsync and synchronous_commit "
        f"on), psycopg {m['psycopg']}, Django {m['django']}. Before the run: {report['busy_cores_before_run']} "
        f"cores busy (3 s of /proc/stat), load average {_load(report['loadavg_before_run'])}.",
        "",
        "## Method",
        "",
        f"{p['n']} workflows of `{p['shape']}` (four no-op steps) over {p['workers']} `ilr_worker` processes x "
        f"concurrency {p['concurrency']}. *keyed*: workflow i starts with concurrency key `k{{i % {p['keys']}}}` "
        f"and limit {p['limit']} ({p['n'] // p['keys']} workflows per key, one at a time); *unkeyed*: the same "
        "workflows with no key. Both are started by the same row insert, all at once from one connection (the "
        "columns `Runtime.start` writes; the insert trigger of migration 0016 takes the key's slot or queues "
        "the start). Each run has a fresh database and fresh workers (`prove.bench.full_measure.run_runtime`, "
        "as in `manage.py bench`); throughput is N over the wall time from the first insert to the last end. "
        f"The {p['rounds']} rounds alternate keyed, unkeyed, keyed, unkeyed ...; the targets are read from the "
        "medians of the rounds.",
        "",
        "After each keyed run the database's own record is read (prove/queries): the most simultaneous "
        "holders of a key, swept over the `[acquired_at, released_at)` intervals of ilr.slots (a release before "
        "an acquisition at the same instant); the most simultaneous runs of a key, swept over each workflow's "
        "first `claimed_at` (ilr.claims) to its ending write's `updated_at`; and for each waiter admitted from "
        "the queue, the time from the `released_at` of the slot's previous holder to the waiter's first "
        "`claimed_at`. Claims between: how many other claims were made between the waiter's admission and its "
        "own claim (due work it queued behind for a worker's slot). The slot invariants of `ilr_check` (SlotMutex, "
        "NoRunWithoutSlot, SlotReleasedAtEnd, NoStrandedWaiter, SlotFifo) run on the same database.",
        "",
        "## Targets",
        "",
        "| target | measured | wanted | verdict |",
        "|---|---|---|---|",
        f"| keyed / unkeyed throughput (medians: {s['keyed_wf_s_median']} / {s['unkeyed_wf_s_median']} wf/s) | "
        f"{t['throughput_ratio']['measured']} | {t['throughput_ratio']['target']} | "
        f"{_verdict(t['throughput_ratio']['met'])} |",
        f"| a waiter's first claim after its key's release, p50 ms (median of the rounds) | "
        f"{t['waiter_start_p50_ms']['measured']} | {t['waiter_start_p50_ms']['target']} | "
        f"{_verdict(t['waiter_start_p50_ms']['met'])} |",
        f"| most simultaneous holders of a key (ilr.slots sweep; every round: {s['max_holders_by_round']}) | "
        f"{t['max_holders']['measured']} | {t['max_holders']['target']} | {_verdict(t['max_holders']['met'])} |",
        "",
        f"Per-round ratios {s['ratio_by_round']}; most simultaneous runs of a key (claims to ends) "
        f"{s['max_running_by_round']}; workflows that did not complete: {s['failed']}; slot invariants "
        f"{'held in every keyed run' if s['slot_invariants_held'] else 'VIOLATED (see the JSON)'}.",
        "",
        "## Rounds",
        "",
        "| round | run | wf/s | e2e p50 ms | e2e p99 ms | commits/wf | PG CPU ms/wf | worker CPU ms/wf | "
        "busy cores | other busy cores | load after | ratio | workers' backends: what they wait on (mean backends) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(report["rounds"], 1):
        for mode in ("keyed", "unkeyed"):
            f = r[mode]
            lines.append(
                f"| {k} | {mode} | {f['workflows_per_s']} | {f['e2e_p50_ms']} | {f['e2e_p99_ms']} | "
                f"{f['commits_per_workflow']} | {_ms(f['postgres_cpu_s_per_workflow'])} | "
                f"{_ms(f['worker_cpu_s_per_workflow'])} | {f['machine_busy_cores']} | {f['other_busy_cores']} | "
                f"{_load(f['loadavg_after'])} | "
                f"{r['ratio'] if mode == 'keyed' else ''} | {_waits(f['worker_waits'])} |"
            )
    lines += [
        "",
        "PG CPU counts every postgres process on the machine (/proc), busy cores the whole machine: both include "
        "whatever else ran meanwhile. Other busy cores is that: the machine's busy CPU during the run less this "
        "cluster's, the workers' and the bench process's, per second of the run. The load averages count the "
        "bench's own processes too. e2e is each workflow's insert to its end on the "
        "database clock: a keyed workflow's includes its wait in its key's queue.",
        "",
        "The last column samples pg_stat_activity every 50 ms during each run: the workers' backends that are "
        "not idle, by wait event, averaged over the samples (CPU: no wait event). `Lock:object` is a wait for a "
        "lock on a shared object; the only such lock these workers take is the one PostgreSQL's NOTIFY holds "
        "from before a notifying transaction's commit record until after it (pg_locks: an object of "
        "pg_database, objid 0), which makes the notifying commits of the whole cluster one at a time. "
        "`LWLock:WALWrite` and `IO:WalSync` are commits waiting for the WAL flush.",
        "",
        "## Keyed runs: the database's record",
        "",
        "| round | slot rows | admitted from the queue | live after | max holders (limit) | max running | "
        "release to claim p50 / p90 / p99 / max ms | release to admission p50 ms | claims between p50 | "
        "slot invariants |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k, r in enumerate(report["rounds"], 1):
        kf = r["keyed"]["keys"]
        lat = kf["latency"]
        held = [name for name, v in kf["invariants"].items() if v == "held"]
        lines.append(
            f"| {k} | {kf['rows']} | {kf['admitted']} | {kf['live']} | {kf['max_holders']} ({kf['slot_limit']}) | "
            f"{kf['max_running']} | {lat['p50_ms']} / {lat['p90_ms']} / {lat['p99_ms']} / {lat['max_ms']} | "
            f"{lat['release_to_admit_p50_ms']} | {lat['claims_between_p50']} | "
            f"{len(held)} of {len(kf['invariants'])} held |"
        )
    ahead = [
        r["keyed"]["keys"]["latency"]["claims_between_p50"] / r["keyed"]["workflows_per_s"] * 1000
        for r in report["rounds"]
    ]
    lines += [
        "",
        f"At each keyed run's average rate, its claims between p50 take {', '.join(f'{ms:.1f}' for ms in ahead)} "
        "ms: roughly how long an admitted waiter waits for the due work ahead of it to be claimed (the claim takes "
        "due rows oldest first). Against the release to admission column, this is how much of a waiter's wait is "
        "for a worker's slot rather than for its key.",
    ]
    (results / "keys_bench.md").write_text("\n".join(lines) + "\n")
    return results / "keys_bench.md"


def _waits(w: dict) -> str:
    return ", ".join(f"{event} {n}" for event, n in w["by_wait"].items()) + f" (of {w['busy_backends']} busy)"


def _verdict(met: bool | None) -> str:
    if met is None:
        return "not judged: another N or number of keys"
    return "met" if met else "**not met**"


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1000:.3f}"


def _load(avg: list[float]) -> str:
    return " / ".join(f"{x:g}" for x in avg)
