"""``manage.py bench --keys K``: concurrency keys under load (issue 42, docs/protocol.md §5.4).

N 4-step workflows (``bench_steps4``, prove/bench/full_flows.py) over W ``ilr_worker`` processes x
concurrency C, started with concurrency key ``k{i % K}`` and limit 1 (run "keyed"), against the
same N started without a key (run "unkeyed"), by the same insert (the columns ``Runtime.start``
writes; the key's insert trigger takes its slot or queues it). Each run is
``prove.bench.full_measure.run_runtime``: a fresh database, fresh workers, the same figures as the
main bench. Rounds alternate keyed, unkeyed, keyed, unkeyed ...; the targets are read from the
medians of the rounds.

After each keyed run the database's own record is read (prove/queries, ilr.slots and
ilr.claims): the most simultaneous holders of each key (a sweep of the holding intervals), the
most simultaneous runs of each key (first claim to end), and for each waiter admitted from the
queue the time from its predecessor's ``released_at`` to its own first ``claimed_at``, with the
number of other claims made in between (the workers' queue it waited behind). The slot
invariants of ``ilr_check`` run on the same database.

Written to results/keys_bench.{md,json} (prove/bench/keys_write.py).
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from bisect import bisect_right
from collections import Counter

from ilr import _db as db
from ilr._invariants import check_all
from prove.bench.core import _pct
from prove.bench.full_measure import BENCH_DB, bench_dsn, run_runtime
from prove.bench.tasks_run import busy_cores, machine_facts
from prove.queries import (
    KEYS_ADMISSIONS,
    KEYS_CLAIM_TIMES,
    KEYS_MAX_HOLDERS,
    KEYS_MAX_RUNNING,
    KEYS_SLOT_COUNTS,
    KEYS_WORKER_WAITS,
)

SHAPE = "bench_steps4"
LIMIT = 1
SLOT_INVARIANTS = ("SlotMutex", "NoRunWithoutSlot", "SlotReleasedAtEnd", "NoStrandedWaiter", "SlotFifo")
TARGET_RATIO = 0.8
TARGET_SHAPE = (5000, 50)
"""The throughput target's N and keys (issue 42); at others the ratio is reported, not judged."""
TARGET_LATENCY_P50_MS = 50.0

# What a run keeps of run_runtime's figures (the latency samples and the refund shape's fields go).
KEPT = (
    "n",
    "failed",
    "failures",
    "takeovers",
    "wall_s",
    "workflows_per_s",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "durable_call_p50_ms",
    "commits_per_workflow",
    "postgres_cpu_s_per_workflow",
    "worker_cpu_s_per_workflow",
    "machine_busy_cores",
    "other_busy_cores",
    "workflows_per_s_per_busy_core",
)


def run(n: int, keys: int, workers: int, concurrency: int, rounds: int, command: str, out=sys.stdout) -> dict:
    """The whole bench; returns the report (written by prove.bench.keys_write.write)."""
    say = lambda s: (out.write(s + "\n"), out.flush())  # noqa: E731
    started = time.monotonic()
    say("the machine before the run (3 s) ...")
    report: dict = {
        "command": command,
        "params": {
            "n": n,
            "keys": keys,
            "limit": LIMIT,
            "workers": workers,
            "concurrency": concurrency,
            "rounds": rounds,
            "shape": SHAPE,
        },
        "machine": {k: v for k, v in machine_facts().items() if not k.startswith("django_tasks")},
        "busy_cores_before_run": busy_cores(),
        "loadavg_before_run": _loadavg(),
        "rounds": [],
    }
    for k in range(rounds):
        pair = {}
        for mode in ("keyed", "unkeyed"):
            say(f"round {k + 1} of {rounds}: {mode}, {n} workflows" + (f" over {keys} keys" if mode == "keyed" else ""))
            key_of = (lambda i: f"k{i % keys}") if mode == "keyed" else (lambda i: None)
            with WaitSampler() as waits:
                r = run_runtime(SHAPE, n, workers, concurrency, {}, lambda i, g: {}, key_of=key_of)
            fig = {key: r[key] for key in KEPT}
            fig["worker_waits"] = waits.result()
            fig["loadavg_after"] = _loadavg()
            if mode == "keyed":
                fig["keys"] = key_figures(bench_dsn())
            pair[mode] = fig
            say(f"  {fig['workflows_per_s']} wf/s" + (f"; {_keys_line(fig['keys'])}" if mode == "keyed" else ""))
        pair["ratio"] = round(pair["keyed"]["workflows_per_s"] / pair["unkeyed"]["workflows_per_s"], 3)
        report["rounds"].append(pair)
    report["summary"] = summarize(report["rounds"], applies=(n, keys) == TARGET_SHAPE)
    report["wall_s"] = round(time.monotonic() - started, 1)
    return report


def key_figures(dsn: str) -> dict:
    """What the bench database's own record says of the keys after a keyed run (prove/queries).

    Returns:
        {"max_holders", "slot_limit", "keys", "rows", "admitted", "live", "max_running",
        "latency": {"n", "p50_ms", "p90_ms", "p99_ms", "max_ms", "release_to_admit_p50_ms",
        "claims_between_p50"}, "invariants": {name: "held" or the violations' count}}.
    """
    with db.connect(dsn) as conn:
        per_key = conn.execute(KEYS_MAX_HOLDERS).fetchall()
        counts = conn.execute(KEYS_SLOT_COUNTS).fetchone()
        admissions = conn.execute(KEYS_ADMISSIONS).fetchall()
        claims = [r["t"] for r in conn.execute(KEYS_CLAIM_TIMES)]
        max_running = conn.execute(KEYS_MAX_RUNNING).fetchone()["max_running"]
        checks = check_all(conn, names=SLOT_INVARIANTS)
    waits = [(a["claimed"] - a["released"]) * 1000 for a in admissions if a["claimed"] is not None]
    admits = [(a["acquired"] - a["released"]) * 1000 for a in admissions]
    # Other claims made between a waiter's admission and its own first claim: the due work ahead.
    between = [
        bisect_right(claims, a["claimed"]) - bisect_right(claims, a["acquired"]) - 1
        for a in admissions
        if a["claimed"] is not None
    ]
    return {
        "max_holders": max((r["max_holders"] for r in per_key), default=0),
        "slot_limit": max((r["slot_limit"] for r in per_key), default=None),
        "keys_over_limit": [r["key"] for r in per_key if r["max_holders"] > r["slot_limit"]],
        **counts,
        "max_running": max_running,
        "latency": {
            "n": len(waits),
            "unclaimed": len(admissions) - len(waits),
            **_quantiles(waits),
            "release_to_admit_p50_ms": round(statistics.median(admits), 3) if admits else None,
            "claims_between_p50": statistics.median(between) if between else None,
        },
        "invariants": {
            name: "held" if v == [] else (v if isinstance(v, str) else f"{len(v)} violations")
            for name, v in checks.items()
        },
    }


class WaitSampler:
    """What the workers' backends wait on during a run: pg_stat_activity of the bench database
    every ``period`` s, on its own connection (prove/queries KEYS_WORKER_WAITS)."""

    def __init__(self, period: float = 0.05):
        self.period = period
        self.counts: Counter = Counter()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="keys-bench-waits", daemon=True)

    def __enter__(self) -> WaitSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        with db.connect(db.conninfo(), application_name="keys-bench-waits") as conn:
            while not self._stop.wait(self.period):
                rows = conn.execute(KEYS_WORKER_WAITS, (BENCH_DB,)).fetchall()
                if rows:  # only while some worker backend is busy: not the set-up or the teardown
                    self.samples += 1
                    self.counts.update({r["wait"]: r["n"] for r in rows})

    def result(self, top: int = 6) -> dict:
        """{"samples", "busy_backends" (mean), "by_wait" {wait event: mean backends}} for the top ones."""
        mean = lambda k: round(k / self.samples, 2) if self.samples else None  # noqa: E731
        return {
            "samples": self.samples,
            "busy_backends": mean(sum(self.counts.values())),
            "by_wait": {w: mean(k) for w, k in self.counts.most_common(top)},
        }


def _quantiles(ms: list[float]) -> dict:
    if not ms:
        return {"p50_ms": None, "p90_ms": None, "p99_ms": None, "max_ms": None}
    return {
        "p50_ms": round(statistics.median(ms), 2),
        "p90_ms": round(_pct(ms, 0.90), 2),
        "p99_ms": round(_pct(ms, 0.99), 2),
        "max_ms": round(max(ms), 2),
    }


def summarize(rounds: list[dict], applies: bool = True) -> dict:
    """The medians over the rounds and the verdict on each of issue 42's targets (the throughput
    ratio's ``met`` is None unless ``applies``: the run has the target's N and keys)."""
    keyed = round(statistics.median(r["keyed"]["workflows_per_s"] for r in rounds), 1)
    unkeyed = round(statistics.median(r["unkeyed"]["workflows_per_s"] for r in rounds), 1)
    ratio = round(keyed / unkeyed, 3)
    p50 = round(statistics.median(r["keyed"]["keys"]["latency"]["p50_ms"] for r in rounds), 2)
    holders = [r["keyed"]["keys"]["max_holders"] for r in rounds]
    running = [r["keyed"]["keys"]["max_running"] for r in rounds]
    failed = sum(r[m]["failed"] for r in rounds for m in ("keyed", "unkeyed"))
    invariants_held = all(v == "held" for r in rounds for v in r["keyed"]["keys"]["invariants"].values())
    return {
        "keyed_wf_s_median": keyed,
        "unkeyed_wf_s_median": unkeyed,
        "ratio": ratio,
        "ratio_by_round": [r["ratio"] for r in rounds],
        "latency_p50_ms_median": p50,
        "max_holders_by_round": holders,
        "max_running_by_round": running,
        "failed": failed,
        "slot_invariants_held": invariants_held,
        "targets": {
            "throughput_ratio": {
                "measured": ratio,
                "target": f">= {TARGET_RATIO} at {TARGET_SHAPE[0]} workflows over {TARGET_SHAPE[1]} keys",
                "met": ratio >= TARGET_RATIO if applies else None,
            },
            "waiter_start_p50_ms": {
                "measured": p50,
                "target": f"<= {TARGET_LATENCY_P50_MS:g}",
                "met": p50 <= TARGET_LATENCY_P50_MS,
            },
            "max_holders": {"measured": max(holders), "target": f"<= {LIMIT}", "met": max(holders) <= LIMIT},
        },
    }


def _keys_line(k: dict) -> str:
    lat = k["latency"]
    return (
        f"max holders {k['max_holders']} (limit {k['slot_limit']}), release to claim p50 {lat['p50_ms']} ms "
        f"p99 {lat['p99_ms']} ms over {lat['n']} admissions"
    )


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]
