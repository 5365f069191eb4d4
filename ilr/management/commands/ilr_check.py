"""``manage.py ilr_check [--ledger PATH] [--access-log PATH]``: run the invariants registry.

Prints each invariant with held, violated (and the offending rows) or skipped; exits 1 on any
violation. The ledger is the payment target's SQLite file; its access log defaults to
``<ledger>.access.jsonl``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand

from ilr import db
from ilr.invariants import check_all


def load_target_evidence(ledger: str | None, access_log: str | None = None) -> dict:
    """Evidence from a payment target's files: {"ledger": rows, "access_log": entries}."""
    if not ledger:
        return {}
    import sqlite3

    con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
    con.row_factory = sqlite3.Row
    rows = [dict(r) for r in con.execute("select * from refunds order by seq")]
    con.close()
    log_path = Path(access_log or f"{ledger}.access.jsonl")
    entries = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()] if log_path.exists() else None
    return {"ledger": rows, "access_log": entries}


class Command(BaseCommand):
    help = "Check every invariant of spec §2.1 (code checks) over this database."

    def add_arguments(self, parser):
        parser.add_argument("--ledger", help="the payment target's SQLite ledger file")
        parser.add_argument("--access-log", help="the target's JSON-lines access log (default <ledger>.access.jsonl)")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    def handle(self, *args, ledger, access_log, json: bool, **options):
        import json as _json

        with db.connect(application_name="ilr-check") as conn:
            results = check_all(conn, load_target_evidence(ledger, access_log))
        bad = False
        if json:
            self.stdout.write(_json.dumps(results, indent=2, default=str))
        for name, result in results.items():
            if isinstance(result, str):
                line = f"{name:30s} {result}"
            elif result:
                bad = True
                line = f"{name:30s} VIOLATED\n" + "\n".join(f"    {_json.dumps(r, default=str)}" for r in result)
            else:
                line = f"{name:30s} held"
            if not json:
                self.stdout.write(line)
        if bad:
            sys.exit(1)
