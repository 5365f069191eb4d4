"""The soak's report (``manage.py soak``, prove/harness/soak.py): what a finished run gathers from
the database, the targets' ledgers and its own record (``collect_report``), and
runtime_soak.{json,md,png} written from it (``write_results``: the Markdown by ``render``, the plot
of throughput over time with the faults)."""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

from prove.queries import (
    SOAK_REPORT_CLAIM_COUNT,
    SOAK_REPORT_EFFECT_STATES,
    SOAK_REPORT_REFUND_OUTCOMES,
    SOAK_REPORT_SENDS,
    SOAK_REPORT_TAKEOVERS,
    SOAK_REPORT_WORKFLOWS,
)

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "runtime_soak"


def collect_report(soak, feed_end: float, drained: float | None, left: dict, final: dict) -> dict:
    """The report of the finished run ``soak`` (a prove.harness.soak.Soak): its database's counts,
    the targets' ledgers (applications per effect: duplicates), its own record (faults, checks,
    throughput samples) and the final invariants check ``final``."""

    def body(conn):
        q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
        return {
            "workflows": {f"{r['name']}:{r['status']}": r["n"] for r in q(SOAK_REPORT_WORKFLOWS)},
            "effects": {f"t{r['tier']}:{r['state']}": r["n"] for r in q(SOAK_REPORT_EFFECT_STATES)},
            "outcomes": {r["status"] or "none": r["n"] for r in q(SOAK_REPORT_REFUND_OUTCOMES)},
            "takeovers": q(SOAK_REPORT_TAKEOVERS)[0],
            "claims": q(SOAK_REPORT_CLAIM_COUNT)[0]["n"],
            "sends": q(SOAK_REPORT_SENDS)[0]["n"],
        }

    db_view = soak._db(body, "report")
    ev = soak.evidence()
    per_effect: dict[str, int] = Counter(r["effect_id"] for r in ev["ledger"] if r.get("effect_id"))
    ledger_tier = {}
    for tier in (1, 2):
        from ilr.management.commands.ilr_check import load_target_evidence

        for r in load_target_evidence(str(soak.ledgers[tier]))["ledger"]:
            ledger_tier[r["effect_id"]] = tier
    dups = Counter(f"t{ledger_tier[e]}" for e, n in per_effect.items() if n > 1)
    throughput = []
    prev = None
    for t, counts in soak.rec.samples:
        done = sum(n for s, n in counts.items() if s in ("completed", "failed", "cancelled", "stuck"))
        if prev is not None and t > prev[0]:
            throughput.append((t, round((done - prev[1]) / (t - prev[0]) * 60, 1)))
        prev = (t, done)
    cfg = soak.cfg
    return {
        "config": cfg.__dict__,
        "feed_seconds": round(feed_end, 1),
        "drain_seconds": drained,
        "unended_after_drain": left,
        "started": dict(soak.rec.started),
        "started_total": sum(soak.rec.started.values()),
        "approvals": soak.rec.approvals,
        "faults": dict(sorted(soak.rec.faults.items())),
        "kill_points_fired": dict(sorted(soak.rec.fired.items())),
        "workflows": db_view["workflows"],
        "effects": db_view["effects"],
        "refund_outcomes": db_view["outcomes"],
        "takeovers": db_view["takeovers"],
        "claims": db_view["claims"],
        "sends": db_view["sends"],
        "ledger_applications": len(ev["ledger"]),
        "duplicates": {"t1": dups.get("t1", 0), "t2": dups.get("t2", 0)},
        "violations_final": {k: v[:5] for k, v in final.items()},
        "violations_periodic": [c for c in soak.rec.checks if c[1]],
        "checks_run": len(soak.rec.checks) + 1,
        "throughput_per_min": throughput,
        "fault_times": soak.rec.fault_times,
        "harness_errors": dict(soak.rec.harness_errors),
        "work_dir": str(soak.work_dir.relative_to(ROOT)),
    }


def write_results(report: dict, command: str, out_dir: Path | None = None) -> Path:
    """Write runtime_soak.{json,md,png} (the plot: throughput over time with the faults) to
    ``out_dir`` (default results/).

    Returns:
        the .md path.
    """
    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
        or "unknown"
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    report = {
        **report,
        "command": command,
        "commit": commit + ("+uncommitted" if dirty else ""),
        "machine": f"{os.cpu_count()} cores",
    }
    base = (Path(out_dir) / RESULTS.name) if out_dir is not None else RESULTS
    base.parent.mkdir(parents=True, exist_ok=True)
    base.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    _plot(report, base.with_suffix(".png"))
    base.with_suffix(".md").write_text(render(report) + "\n")
    return base.with_suffix(".md")


def _unended(report: dict) -> int:
    return sum(report["unended_after_drain"].values())


def render(report: dict) -> str:
    """The Markdown report of one soak run."""
    cfg = report["config"]
    stuck = sum(n for k, n in report["workflows"].items() if k.endswith(":stuck"))
    failed = sum(n for k, n in report["workflows"].items() if k.endswith(":failed"))
    ended = sum(
        n for k, n in report["workflows"].items() if k.split(":")[1] in ("completed", "failed", "cancelled", "stuck")
    )
    drain_note = (
        report["drain_seconds"]
        and "after a drain of " + str(report["drain_seconds"]) + " s"
        or "when the drain timed out"
    )
    verdict = [
        f"- invariant violations: **{sum(len(v) for v in report['violations_final'].values())}** at the end, "
        f"{len(report['violations_periodic'])} periodic checks with any (of {report['checks_run']} checks run)",
        f"- duplicates (a ledger applying one effect more than once): tier 1 **{report['duplicates']['t1']}**, "
        f"tier 2 **{report['duplicates']['t2']}**",
        f"- workflows: {report['started_total']} started, {ended} ended, **{stuck}** stuck, {failed} failed, "
        f"**{_unended(report)}** not ended {drain_note}",
    ]
    lines = [
        f"# Soak: {cfg['minutes']:g} minutes of work under faults",
        "",
        f"Made by `{report['command']}` at commit {report['commit']} on {report['machine']} "
        f"(the embedded PostgreSQL; the targets' faults are EMULATED: blackhole, delay, lost answer). "
        f"Workers' logs and the targets' ledgers: {report['work_dir']}.",
        "",
        *verdict,
        "",
        "## Configuration",
        "",
        f"{cfg['minutes']} minutes of feed at {cfg['rate']} workflows/s (refund at tier 1, soak_steps, refund at "
        f"tier 2, soak_steps, in turn), {cfg['workers']} workers x concurrency {cfg['concurrency']}, lease "
        f"{cfg['lease_ttl']} s, poll {cfg['poll']} s, send timeout {cfg['send_timeout']} s, settle margin "
        f"{cfg['settle_margin']} s; a worker or target fault every {cfg['fault_every']} s on average, a restarted "
        f"worker armed with a kill or stop point with probability {cfg['arm_probability']}, PostgreSQL crashed "
        f"every {cfg['pg_restart_every']} s, invariants every {cfg['check_every']} s; seed {cfg['seed']}. Feed "
        f"ran {report['feed_seconds']} s.",
        "",
        "## Faults injected",
        "",
        "| kind | count |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in report["faults"].items()],
        "",
        "Kill and stop points that fired (armed worker reached the point): "
        + (", ".join(f"{k} x{v}" for k, v in report["kill_points_fired"].items()) or "none")
        + ".",
        "",
        "## Outcomes",
        "",
        "| workflow:status | count |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in report["workflows"].items()],
        "",
        "| effect tier:state | count |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in report["effects"].items()],
        "",
        "Refund results: " + ", ".join(f"{k} {v}" for k, v in report["refund_outcomes"].items()) + ".",
        "",
        f"Approvals given: {report['approvals']}. Claims: {report['claims']}; takeovers (a claim of a running "
        f"workflow whose lease had lapsed): {report['takeovers']['n']} workflows, at most "
        f"{report['takeovers']['max_per_workflow']} for one. Sends: {report['sends']}; ledger applications: "
        f"{report['ledger_applications']}.",
        "",
        "## Throughput",
        "",
        "![throughput over time](runtime_soak.png)",
        "",
        "Workflows ended per minute, sampled every 10 s (the plot marks PostgreSQL crashes in red and other "
        "faults as ticks).",
        "",
    ]
    if report["violations_final"] or report["violations_periodic"]:
        lines += [
            "## Violations",
            "",
            "```",
            json.dumps(
                {"final": report["violations_final"], "periodic": report["violations_periodic"]}, indent=2, default=str
            ),
            "```",
            "",
        ]
    if report["harness_errors"]:
        lines += [
            "## Harness retries and errors",
            "",
            "Calls of the harness itself (start, signal, approve, sample) retried after a connection fault "
            "or failed; not the runtime's.",
            "",
            "| what | count |",
            "|---|---|",
            *[f"| {k} | {v} |" for k, v in sorted(report["harness_errors"].items())],
            "",
        ]
    return "\n".join(lines)


def _plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = report["throughput_per_min"]
    fig, ax = plt.subplots(figsize=(10, 4))
    if pts:
        ax.plot([p[0] / 60 for p in pts], [p[1] for p in pts], lw=1, color="tab:blue", label="ended / min")
    for t, kind in report["fault_times"]:
        if kind == "pg_restart_immediate":
            ax.axvline(t / 60, color="tab:red", lw=1, alpha=0.7)
        else:
            ax.axvline(t / 60, ymin=0, ymax=0.04, color="gray", lw=1)
    ax.set_xlabel("minutes")
    ax.set_ylabel("workflows ended per minute")
    ax.set_title("soak: throughput under faults (red: PostgreSQL crash and restart)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
