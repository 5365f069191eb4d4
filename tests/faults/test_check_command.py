"""``manage.py ilr_check`` with a bad --ledger or --access-log: one CommandError line naming the
flag and the problem, exit 2 (bad usage), never the exit 1 that means an invariant was violated."""

from __future__ import annotations

import sqlite3

import pytest

from tests.support.workers import check


def one_clean_error(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith("CommandError: ")
    assert "held" not in proc.stdout and "VIOLATED" not in proc.stdout
    return lines[0]


@pytest.mark.parametrize(
    "kind, words",
    [
        ("missing", ["no such file"]),
        ("directory", ["not a file"]),
        ("text", ["not an SQLite database"]),
        ("no_table", ["no refunds table"]),
    ],
)
def test_a_bad_ledger_is_bad_usage(workers, tmp_path, kind, words):
    path = tmp_path / "ledger.sqlite"
    if kind == "directory":
        path.mkdir()
    elif kind == "text":
        path.write_text("this is not a database\n" * 100)
    elif kind == "no_table":
        con = sqlite3.connect(path)
        con.execute("create table other (x)")
        con.commit()
        con.close()
    line = one_clean_error(check(workers, "--ledger", str(path)))
    assert "--ledger" in line and str(path) in line
    for word in words:
        assert word in line, line


def test_a_bad_access_log_is_bad_usage(workers, tmp_path):
    ledger = tmp_path / "ledger.sqlite"
    con = sqlite3.connect(ledger)
    con.execute("create table refunds (seq integer primary key, payment text)")
    con.commit()
    con.close()
    log = tmp_path / "access.jsonl"
    log.write_text('{"path": "/refunds"}\nnot json\n')
    line = one_clean_error(check(workers, "--ledger", str(ledger), "--access-log", str(log)))
    assert "--access-log" in line and "line 2" in line
    missing = one_clean_error(check(workers, "--ledger", str(ledger), "--access-log", str(tmp_path / "none.jsonl")))
    assert "--access-log" in missing and "no such file" in missing


def test_help_documents_the_exit_codes(workers):
    proc = check(workers, "--help")
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Exit 0 all held, 1 a violation, 2 bad usage" in text
