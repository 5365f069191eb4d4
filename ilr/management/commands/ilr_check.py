"""``manage.py ilr_check [--ledger PATH] [--access-log PATH]``: run the invariants registry.

Prints each invariant with held, violated (and the offending rows) or skipped, then any
orphaned dispatches (not a violation: ``rt.recover_orphans()`` resolves them) and the
versions with due work and no live worker (``rt.unserved()``; not a violation either: a worker
that registers the version claims it); with --json both go to stderr. The ledger is the
payment target's SQLite file; its access log defaults to ``<ledger>.access.jsonl`` (skipped
when that default is absent; an --access-log given explicitly must exist).

Exit status: 0 every invariant held (or was skipped), 1 a violation, 2 bad usage (a --ledger
that is missing or not the target's SQLite ledger, an unreadable --access-log, a bad flag).
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ilr import _db as db
from ilr._effects.orphans import find_orphans
from ilr._invariants import check_all
from ilr._ops.deployments import NO_WORKER_ROW
from ilr._ops.runtime import unserved_on
from ilr._queries.misc import READ_LEDGER_SELECT_SQL


def _bad(flag: str, path: str, problem: str) -> CommandError:
    return CommandError(f"{flag} {path}: {problem}", returncode=2)


def _read_ledger(ledger: str) -> list[dict]:
    path = Path(ledger)
    if not path.exists():
        raise _bad("--ledger", ledger, "no such file (the payment target's SQLite ledger)")
    if not path.is_file():
        raise _bad("--ledger", ledger, "not a file (the payment target's SQLite ledger)")
    try:
        con = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
        try:
            con.row_factory = sqlite3.Row
            return [dict(r) for r in con.execute(READ_LEDGER_SELECT_SQL)]
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        if "no such table" in str(exc):
            raise _bad("--ledger", ledger, "has no refunds table; is it the payment target's ledger?") from None
        if "not a database" in str(exc):
            raise _bad("--ledger", ledger, "not an SQLite database (the payment target's ledger)") from None
        raise _bad("--ledger", ledger, f"cannot be read as the payment target's ledger: {exc}") from None


def _read_access_log(path: Path, explicit: bool) -> list[dict] | None:
    if not path.exists():
        if explicit:
            raise _bad("--access-log", str(path), "no such file (the target's JSON-lines access log)")
        return None
    entries = []
    try:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    entries.append(json.loads(line))
                except ValueError as exc:
                    raise _bad("--access-log", str(path), f"line {number} is not JSON ({exc})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise _bad("--access-log", str(path), f"cannot be read: {exc}") from None
    return entries


def load_target_evidence(ledger: str | None, access_log: str | None = None) -> dict:
    """Evidence from a payment target's files: {"ledger": rows, "access_log": entries}.

    Raises:
        CommandError (returncode 2): a ledger that is missing, not a file, not SQLite or without
            a refunds table; an access log given explicitly that is missing; a log line that is
            not JSON.
    """
    if not ledger:
        return {}
    rows = _read_ledger(ledger)
    entries = _read_access_log(Path(access_log or f"{ledger}.access.jsonl"), explicit=bool(access_log))
    return {"ledger": rows, "access_log": entries}


class Command(BaseCommand):
    help = (
        "Check every invariant (docs/protocol.md section 11) over this database. "
        "Exit 0 all held, 1 a violation, 2 bad usage (e.g. a --ledger that is missing or not SQLite)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--ledger", help="the payment target's SQLite ledger file")
        parser.add_argument("--access-log", help="the target's JSON-lines access log (default <ledger>.access.jsonl)")
        parser.add_argument("--json", action="store_true", help="print the results as JSON")

    def handle(self, *args, ledger, access_log, json: bool, **options):
        import json as _json

        evidence = load_target_evidence(ledger, access_log)  # bad files: exit 2 before any database work
        with db.connect(application_name="ilr-check") as conn:
            results = check_all(conn, evidence)
            orphans = find_orphans(conn)
            unserved = unserved_on(conn)
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
        if orphans:
            # Not a violation: an orphan is an unknown outcome that recovery resolves
            # (docs/protocol.md §8).
            # With --json, on stderr, so stdout stays the invariants' JSON.
            out = self.stderr if json else self.stdout
            out.write(
                f"\n{len(orphans)} orphaned dispatch(es): effects still dispatched under a workflow that "
                "ended; rt.recover_orphans({name: target}) resolves them"
            )
            for eff in orphans[:10]:
                out.write(
                    f"    {eff['effect_id']}  workflow {eff['dispatch_workflow_id']} ({eff['wf_status']}), "
                    f"target {eff['target']}"
                )
            if len(orphans) > 10:
                out.write(f"    ... and {len(orphans) - 10} more")
        if unserved:
            out = self.stderr if json else self.stdout
            out.write(
                f"\n{len(unserved)} version(s) with due work and no live worker: start a worker that "
                "registers it (ilr_worker --only name@version), or rt.migrate the workflows"
            )
            for u in unserved:
                seen = f"last seen {u['last_seen']:%Y-%m-%d %H:%M:%S %Z}" if u["last_seen"] else NO_WORKER_ROW
                out.write(f"    {u['name']}@{u['version']}  {u['due']} due, no live worker serves it ({seen})")
        if bad:
            sys.exit(1)
