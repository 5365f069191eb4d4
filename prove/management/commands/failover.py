"""``manage.py failover [--mode sync|async|both] [--workflows N] [--lag S] [--lease-ttl S]
[--sync-commit on|remote_apply] [--workdir DIR] [--no-write]``: kill a primary mid-run, promote
its streaming standby, and measure what was lost and whether anything was applied twice
(prove.harness.failover); writes results/runtime_failover.md and .json. Needs Debian's PostgreSQL
server package (/usr/lib/postgresql/*/bin); the clusters are its own, under --workdir or a
temporary directory, and are stopped whatever happens.

Exit status: 0 when the run upheld the runtime's promises (no duplicate at tier 1 or 2, no
untruthful receipt, no invariant violated, and in sync mode nothing acknowledged lost), 1
otherwise."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError


def failures(row: dict) -> list[str]:
    """The broken promises of one ``prove.harness.failover.run`` row, as sentences."""
    out = []
    if row["duplicates"]["tier1"] or row["duplicates"]["tier2"]:
        out.append(f"duplicates at tier 1/2: {row['duplicates']}")
    if row["receipts"]["untruthful"]:
        out.append(f"{row['receipts']['untruthful']} untruthful receipts")
    if row["invariant_violations"]:
        out.append(f"invariants violated: {', '.join(row['invariant_violations'])}")
    if row["lost_send_rule"]["broken"]:
        out.append(f"{row['lost_send_rule']['broken']} first sends did not wait out a lost send")
    if row["epochs_issued_twice"]:
        out.append(f"{row['epochs_issued_twice']} epochs issued twice")
    lost = row["lost_acknowledged"]
    if row["mode"] == "sync" and any(lost[k] for k in ("steps", "journal", "signals", "claims", "effects_committed")):
        out.append(f"sync mode lost acknowledged commits: {lost}")
    return out


class Command(BaseCommand):
    help = "Kill a primary mid-run, promote its standby; measure loss and duplicates (results/runtime_failover.md)."

    def add_arguments(self, parser):
        parser.add_argument("--mode", choices=("sync", "async", "both"), default="both")
        parser.add_argument("--workflows", type=int, default=24)
        parser.add_argument(
            "--lag", type=float, default=1.5, help="async: seconds the WAL sender is stopped before the kill"
        )
        parser.add_argument("--lease-ttl", type=float, default=4.0)
        parser.add_argument("--sync-commit", choices=("on", "remote_apply"), default="on")
        parser.add_argument("--workdir", help="directory for the clusters, ledgers and logs (kept)")
        parser.add_argument("--no-write", action="store_true", help="do not write results/runtime_failover.*")

    def handle(self, *args, mode, workflows, lag, lease_ttl, sync_commit, workdir, no_write, **options):
        import json

        from prove.harness.failover import run
        from prove.harness.failover_report import write_results
        from prove.peers.pg_cluster import have_server

        if not have_server():
            raise CommandError("no Debian PostgreSQL server under /usr/lib/postgresql (apt-get install postgresql)")
        if workflows < 2:
            raise CommandError("--workflows must be at least 2")
        rows = []
        for m in ("sync", "async") if mode == "both" else (mode,):
            wd = Path(workdir) / m if workdir else None
            rows.append(
                run(
                    m,
                    workflows=workflows,
                    lag=lag,
                    lease_ttl=lease_ttl,
                    sync_commit=sync_commit,
                    workdir=wd,
                    out=self.stdout,
                )
            )
        if not no_write:
            write_results(rows, "python manage.py failover " + " ".join(sys.argv[2:]))
        bad = [f"{r['mode']}: {f}" for r in rows for f in failures(r)]
        self.stdout.write(json.dumps(rows, indent=2, default=str) if options.get("verbosity", 1) > 1 else "")
        for line in bad:
            self.stderr.write(line)
        if bad:
            sys.exit(1)
