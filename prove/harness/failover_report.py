"""The failover run's report (``manage.py failover``, prove/harness/failover.py):
results/runtime_failover.json, one row per mode (the newest kept), and the .md rendered from it,
stamped with the commit the run measured."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "runtime_failover"


def _commit() -> str:
    """HEAD's short hash, with "+uncommitted" when the engine, the harness or the migrations differ from it."""
    git = lambda *a: subprocess.run(
        ["git", *a],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+uncommitted" if git("status", "--porcelain", "--", "ilr", "prove") else "")


def write_results(rows: list[dict], command: str) -> None:
    """results/runtime_failover.json (one row per mode, the newest kept) and .md rendered from it."""
    commit = _commit()
    path = RESULTS.with_suffix(".json")
    kept = json.loads(path.read_text()) if path.exists() else []
    for row in rows:
        row.update({"command": command, "commit": commit, "machine": f"{os.cpu_count()} cores"})
        kept = [r for r in kept if r["mode"] != row["mode"]] + [row]
    kept.sort(key=lambda r: r["mode"] != "sync")
    path.write_text(json.dumps(kept, indent=2, default=str) + "\n")
    lines = [
        "# Failover: a primary killed mid-run, its standby promoted",
        "",
        "Made by `manage.py failover` (prove/harness/failover.py; "
        "each row's command and commit below). Two clusters of "
        "Debian's PostgreSQL server package, a streaming standby over a replication slot; two `ilr_worker` "
        "processes reach them through one multi-host URL; each workflow records a step, consumes a signal, "
        "sends a tier-1 and a tier-2 refund to the local payment targets under a policy grant, and records two "
        "more steps. The primary's postmaster and every child are SIGKILLed mid-run, then the standby is "
        "promoted (`pg_ctl promote`).",
        "",
        "*Acknowledged*: what the old primary showed committed just before the kill. *In the old WAL*: what its "
        "own WAL held at its death (its data directory recovered afterwards). *Lost*: not on the standby when it "
        "was promoted. Duplicates: effects the target applied more than once. Receipts: `verify_receipt()` of "
        "every effect held against the ledger (happened True needs an application, False none, happened_once "
        "True exactly one).",
        "",
    ]
    for r in kept:
        la, lw = r["lost_acknowledged"], r["lost_in_old_wal"]
        lines += [
            f"## {r['mode']}: {r['replication']}",
            "",
            f"`{r['command']}` at {r['commit']} ({r['machine']}, {r['server']}); DSN `{r['dsn_form']}`.",
            "",
            "| figure | value |",
            "|---|---|",
            f"| workflows (in flight at the kill; running) | {r['workflows']} ({r['in_flight_at_kill']}; "
            f"{r['running_at_kill']}) |",
            f"| kill to promoted / promoted to first step / kill to all ended (s) | {r['kill_to_promote_s']} / "
            f"{r['promote_to_first_progress_s']} / {r['kill_to_all_ended_s']} |",
            f"| acknowledged before the kill: steps, journal, signals, COMMITTED effects | "
            f"{r['acknowledged_before_kill']['steps']}, {r['acknowledged_before_kill']['journal']}, "
            f"{r['acknowledged_before_kill']['signals']}, {r['acknowledged_before_kill']['effects_committed']} |",
            f"| lost of the acknowledged: steps, journal (by kind), signals, claims, COMMITTED effects | "
            f"{la['steps']}, {la['journal']} {json.dumps(la['journal_by_kind'])}, {la['signals']}, "
            f"{la['claims']}, {la['effects_committed']} |",
            f"| lost of the old WAL: steps, journal (by kind), signals, claims, COMMITTED effects | "
            f"{lw['steps']}, {lw['journal']} {json.dumps(lw['journal_by_kind'])}, {lw['signals']}, "
            f"{lw['claims']}, {lw['effects_committed']} |",
            f"| signals re-sent by the client (lost) | {r['signals_resent']} |",
            f"| epochs issued twice (a lost claim's epoch claimed again) | {r['epochs_issued_twice']} |",
            f"| applications tier 1 / tier 2 | {r['applications']['tier1']} / {r['applications']['tier2']} |",
            f"| **duplicates tier 1 / tier 2** | **{r['duplicates']['tier1']} / {r['duplicates']['tier2']}** |",
            f"| effect statuses | {', '.join(f'{k} {v}' for k, v in r['effect_statuses'].items())} |",
            f"| workflow statuses | {', '.join(f'{k} {v}' for k, v in r['workflow_statuses'].items())} |",
            f"| invariants checked / violated | {r['invariants_checked']} / "
            f"{', '.join(r['invariant_violations']) or 'none'} |",
            f"| receipts checked / untruthful | {r['receipts']['checked']} / {r['receipts']['untruthful']} |",
            f"| first sends after the switch / broke the wait-out rule | "
            f"{r['lost_send_rule']['first_sends_after_switch']} / {r['lost_send_rule']['broken']} |",
            f"| timelines recorded | {r['timelines']} |",
            "",
        ]
        if r["invariant_violations"]:
            lines += [
                "Violations (first rows):",
                "",
                "```",
                *[f"{k}: {json.dumps(v[:3], default=str)}" for k, v in r["invariant_violations"].items()],
                "```",
                "",
            ]
        if r["receipts"]["examples"]:
            lines += [
                "Untruthful receipts (first rows):",
                "",
                "```",
                *[json.dumps(e, default=str) for e in r["receipts"]["examples"]],
                "```",
                "",
            ]
    RESULTS.with_suffix(".md").write_text("\n".join(lines) + "\n")
