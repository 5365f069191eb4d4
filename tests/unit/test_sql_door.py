"""One door to the tables: no module of ``ilr`` outside ``ilr/_queries/`` holds SQL, and no module
of the repository's apps (``demo``, ``prove``) outside its ``queries`` module holds SQL on the ilr
tables.

Every string literal (and every f-string's literal parts) of every module is read with ``ast``; in
``ilr``, one that reads as a SQL statement or names an ``ilr.`` table fails the test, naming the
file and line; in the apps, one that reads as SQL and names an ``ilr.`` table (their SQL on their
own tables, a target's SQLite ledger or PostgreSQL's statistics, is theirs). The tests are held
to the apps' rule: their SQL on the ilr tables lives in ``tests/support/queries/``. Docstrings and
comments are prose and are not read. The migrations keep their SQL in ``ilr/sql/``.
"""

from __future__ import annotations

import ast
import re

import pytest

from tests.support import ROOT

TABLES = (
    "workflows|steps|claims|effects|journal|grants|signals|approval_requests|llm_calls|responses|deployments|"
    "worker_deployments|timelines|slots|schedules|schedule_ticks"
)
STATEMENT = re.compile(
    r"^\s*\(?\s*("
    r"select\s|insert\s+into\s|update\s+\w+(\.\w+)?\s+set\s|delete\s+from\s|with\s+\w+\s+as\s*\(|"
    r"lock\s+table\s|listen\s|notify\s|unlisten\s|set\s+(local\s+|session\s+)?\w+\s*(=|to)\s|alter\s+table\s"
    r")",
    re.I,
)
CLAUSE = re.compile(
    rf"\b(from|join|into|update|analyze)\s+ilr\.({TABLES})\b|\bwhere\s+\w+(\.\w+)?\s*(=|<|>|in\b|is\b)", re.I
)
NAMES_A_TABLE = re.compile(rf"\bilr\.({TABLES})\b", re.I)
DOOR = ROOT / "ilr" / "_queries"
APP_DOORS = {
    "demo": ROOT / "demo" / "queries.py",
    "prove": ROOT / "prove" / "queries.py",
    "tests": ROOT / "tests" / "support" / "queries.py",
}
"""Each app's (and the tests') one module of named statements on the ilr tables (a package of that
name would do too)."""
NOT_HELD = {ROOT / "tests" / "unit" / "test_sql_door.py"}
"""Modules outside every door that may hold SQL on the tables: this one, whose examples are the data
the detector is tested on, never statements it runs."""


def reads_as_sql(text: str) -> bool:
    """True when ``text`` reads as a SQL statement, or a clause of one on the ilr tables. Prose that
    names a table ("no ilr.timelines row") and logger names ("ilr.effects") are not SQL."""
    return bool(STATEMENT.match(text) or CLAUSE.search(text))


def sql_literals(source: str, reads=reads_as_sql) -> list[tuple[int, str]]:
    """(line, text) of every string literal of ``source`` that ``reads`` as SQL, docstrings aside."""
    tree = ast.parse(source)
    prose = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            prose.add(id(node.value))  # a docstring, or an attribute's docstring
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if reads(text):
                found.append((node.lineno, text))
            prose.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if reads(node.value):
                found.append((node.lineno, node.value))
    return found


def reads_as_sql_on_the_tables(text: str) -> bool:
    """True when ``text`` reads as SQL and names an ilr table: what an app keeps in its door."""
    return reads_as_sql(text) and bool(NAMES_A_TABLE.search(text))


def test_the_detector_tells_sql_from_prose():
    sql = [
        "select 1",
        "update ilr.effects set state = %s where effect_id = %s",
        "insert into ilr.journal (effect_id) values (%s)",
        "with tree as (select id from x) select 1",
        "now() > send_deadline + settle_margin",  # names no table: only its users would say
        " from ilr.effects e join ilr.workflows w on w.id = e.workflow_id",
        "listen ilr_claimable",
        "analyze ilr.workflows",
    ]
    prose = [
        "with --verify: trust only this public key file",
        "Set its ENGINE to 'django.db.backends.postgresql'",
        "with no decision",
        "select a version with --version",
        "ilr.effects",
        "timeline has no ilr.timelines row after its insert",
    ]
    assert [reads_as_sql(s) for s in sql] == [True, True, True, True, False, True, True, True]
    assert [reads_as_sql(s) for s in prose] == [False, False, False, True, False, False]  # a known false alarm


def test_no_module_of_ilr_outside_the_door_holds_sql():
    offenders = []
    for path in sorted((ROOT / "ilr").rglob("*.py")):
        if DOOR in path.parents or "migrations" in path.parts:
            continue
        for line, text in sql_literals(path.read_text()):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {' '.join(text.split())[:80]}")
    assert not offenders, "SQL outside ilr/_queries/:\n" + "\n".join(offenders)


def test_the_apps_detector_keeps_to_the_ilr_tables():
    on_the_tables = [
        "select * from ilr.claims where workflow_id = %s",
        "select to_regclass('ilr.timelines') as t",
        "analyze ilr.workflows",
        "select count(*) filter (where status = 'ended') as ended from ilr.workflows",
    ]
    elsewhere = [
        "select paid from payments where id = ?",
        "select xact_commit from pg_stat_database where datname = %s",
        "select status from dbos.workflow_status",
        "Every claim is in ilr.claims with its owner.",
    ]
    assert all(reads_as_sql_on_the_tables(s) for s in on_the_tables)
    assert not any(reads_as_sql_on_the_tables(s) for s in elsewhere)


def app_offenders(app: str) -> list[str]:
    """``path:line: text`` of every SQL literal on the ilr tables in ``app`` outside its door."""
    door = APP_DOORS[app]
    offenders = []
    for path in sorted((ROOT / app).rglob("*.py")):
        if path == door or door.with_suffix("") in path.parents or path in NOT_HELD:
            continue
        for line, text in sql_literals(path.read_text(), reads_as_sql_on_the_tables):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {' '.join(text.split())[:80]}")
    return offenders


@pytest.mark.parametrize("app", sorted(APP_DOORS))
def test_no_module_of_the_apps_outside_their_door_holds_sql_on_the_tables(app):
    offenders = app_offenders(app)
    assert not offenders, f"SQL on the ilr tables outside {APP_DOORS[app].relative_to(ROOT)}:\n" + "\n".join(offenders)


def test_a_stray_statement_in_an_app_is_found(tmp_path, monkeypatch):
    app = tmp_path / "demo"
    app.mkdir()
    (app / "queries.py").write_text('A = "select * from ilr.claims"\n"""Its purpose."""\n')
    (app / "report.py").write_text(
        'def f(conn):\n    """Prose on ilr.claims."""\n    conn.execute("select 1 from ilr.steps")\n'
    )
    monkeypatch.setattr(__name__ + ".ROOT", tmp_path)
    monkeypatch.setitem(APP_DOORS, "demo", app / "queries.py")
    assert app_offenders("demo") == ["demo/report.py:3: select 1 from ilr.steps"]


def test_a_stray_statement_in_the_tests_is_found(tmp_path, monkeypatch):
    tests = tmp_path / "tests"
    (tests / "support" / "queries").mkdir(parents=True)
    (tests / "faults").mkdir()
    (tests / "support" / "queries" / "claims.py").write_text('A = "select * from ilr.claims"\n"""Its purpose."""\n')
    (tests / "support" / "waits.py").write_text(
        'def f(conn):\n    return conn.execute(f"delete from ilr.steps where seq = {n}")\n'
    )
    (tests / "faults" / "test_x.py").write_text(
        "from tests.support.queries.claims import A\n\n\ndef test_x(rt):\n"
        '    rt.connection().execute(A)\n    rt.connection().execute("update ilr.steps set name = name")\n'
    )
    monkeypatch.setattr(__name__ + ".ROOT", tmp_path)
    monkeypatch.setitem(APP_DOORS, "tests", tests / "support" / "queries.py")
    assert app_offenders("tests") == [
        "tests/faults/test_x.py:6: update ilr.steps set name = name",
        "tests/support/waits.py:2: delete from ilr.steps where seq =",
    ]


def door_modules() -> list:
    """The engine's door's modules and each app's."""
    modules = sorted(DOOR.glob("*.py"))
    for door in APP_DOORS.values():
        modules += sorted(door.with_suffix("").glob("*.py")) if door.with_suffix("").is_dir() else [door]
    return modules


def test_every_statement_in_the_door_has_a_purpose_line():
    missing = []
    for path in door_modules():
        body = ast.parse(path.read_text()).body
        for node, following in zip(body, [*body[1:], None]):
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
                documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                if not documented:
                    missing.append(f"{path.name}: {node.targets[0].id}")  # type: ignore[attr-defined]
    assert not missing, f"statements without a purpose line: {missing}"
