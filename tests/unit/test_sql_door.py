"""One door to the tables: no module of ``ilr`` outside ``ilr/_queries/`` holds SQL.

Every string literal (and every f-string's literal parts) of every ``ilr`` module is read with
``ast``; one that reads as a SQL statement or names an ``ilr.`` table fails the test, naming the
file and line. Docstrings and comments are prose and are not read. The migrations keep their
SQL in ``ilr/sql/``.
"""

from __future__ import annotations

import ast
import re

from tests.support import ROOT

TABLES = (
    "workflows|steps|claims|effects|journal|grants|signals|approval_requests|llm_calls|responses|deployments|"
    "worker_deployments|timelines"
)
STATEMENT = re.compile(
    r"^\s*\(?\s*("
    r"select\s|insert\s+into\s|update\s+\w+(\.\w+)?\s+set\s|delete\s+from\s|with\s+\w+\s+as\s*\(|"
    r"lock\s+table\s|listen\s|notify\s|unlisten\s|set\s+(local\s+|session\s+)?\w+\s*(=|to)\s|alter\s+table\s"
    r")",
    re.I,
)
CLAUSE = re.compile(rf"\b(from|join|into|update)\s+ilr\.({TABLES})\b|\bwhere\s+\w+(\.\w+)?\s*(=|<|>|in\b|is\b)", re.I)
DOOR = ROOT / "ilr" / "_queries"


def reads_as_sql(text: str) -> bool:
    """True when ``text`` reads as a SQL statement, or a clause of one on the ilr tables. Prose that
    names a table ("no ilr.timelines row") and logger names ("ilr.effects") are not SQL."""
    return bool(STATEMENT.match(text) or CLAUSE.search(text))


def sql_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal of ``source`` that reads as SQL, docstrings aside."""
    tree = ast.parse(source)
    prose = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            prose.add(id(node.value))  # a docstring, or an attribute's docstring
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if reads_as_sql(text):
                found.append((node.lineno, text))
            prose.update(id(v) for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in prose:
            if reads_as_sql(node.value):
                found.append((node.lineno, node.value))
    return found


def test_the_detector_tells_sql_from_prose():
    sql = [
        "select 1",
        "update ilr.effects set state = %s where effect_id = %s",
        "insert into ilr.journal (effect_id) values (%s)",
        "with tree as (select id from x) select 1",
        "now() > send_deadline + settle_margin",  # names no table: only its users would say
        " from ilr.effects e join ilr.workflows w on w.id = e.workflow_id",
        "listen ilr_claimable",
    ]
    prose = [
        "with --verify: trust only this public key file",
        "Set its ENGINE to 'django.db.backends.postgresql'",
        "with no decision",
        "select a version with --version",
        "ilr.effects",
        "timeline has no ilr.timelines row after its insert",
    ]
    assert [reads_as_sql(s) for s in sql] == [True, True, True, True, False, True, True]
    assert [reads_as_sql(s) for s in prose] == [False, False, False, True, False, False]  # a known false alarm


def test_no_module_of_ilr_outside_the_door_holds_sql():
    offenders = []
    for path in sorted((ROOT / "ilr").rglob("*.py")):
        if DOOR in path.parents or "migrations" in path.parts:
            continue
        for line, text in sql_literals(path.read_text()):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {' '.join(text.split())[:80]}")
    assert not offenders, "SQL outside ilr/_queries/:\n" + "\n".join(offenders)


def test_every_statement_in_the_door_has_a_purpose_line():
    missing = []
    for path in sorted(DOOR.glob("*.py")):
        body = ast.parse(path.read_text()).body
        for node, following in zip(body, [*body[1:], None]):
            if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets):
                documented = isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                if not documented:
                    missing.append(f"{path.name}: {node.targets[0].id}")  # type: ignore[attr-defined]
    assert not missing, f"statements without a purpose line: {missing}"
