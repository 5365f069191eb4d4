"""The reusable apps stand alone: no module of ``ilr`` or ``approvals`` imports this repository's
project (``interlock_project``: settings, the embedded PostgreSQL) or its harness (``prove``).

Every .py file is parsed with ``ast``; every Import and ImportFrom counts, including imports
inside functions and ``if`` blocks.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APPS = ("ilr", "approvals")
FORBIDDEN = ("interlock_project", "prove")



def imports_of(source: str, package: str) -> set[str]:
    """Every module ``source`` (a module of ``package``) imports, relative imports resolved; a
    ``from m import n`` counts as m and as m.n."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def offenders() -> set[tuple[str, str]]:
    """(file, module) for each forbidden import, named by the module as written."""
    result = set()
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT)
            package = ".".join(rel.parts[:-1])  # a module's package; an __init__'s own
            found = {m for m in imports_of(path.read_text(), package) if m.split(".")[0] in FORBIDDEN}
            # from a.b import c: keep a.b, drop the a.b.c spelling of the same import
            result.update((rel.as_posix(), m) for m in found if not any(m.startswith(o + ".") for o in found))
    return result


def test_the_walk_sees_every_kind_of_import():
    source = ("import os\nif True:\n    import interlock_project.settings\n"
              "def f():\n    from prove.workflows import target_for\n"
              "class C:\n    def g(self):\n        from .. import conf\n")
    found = imports_of(source, "approvals.sub")
    assert {"interlock_project.settings", "prove.workflows", "prove.workflows.target_for",
            "approvals.conf"} <= found


def test_no_app_module_imports_the_project_or_the_harness():
    found = sorted(offenders())
    assert not found, f"ilr/approvals import the project or the harness: {found}"
