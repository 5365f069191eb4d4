"""The reusable apps stand alone: no module of ``ilr`` or ``approvals`` imports this repository's
project (``interlock_project``: settings, the embedded PostgreSQL), its demo (``demo``) or its
harness (``prove``); the demo needs nothing of the harness (``prove`` may import ``demo``, never
the other way); and no package of the repository has an import cycle, not even one held together
by an import inside a function.

Every .py file is parsed with ``ast``; every Import and ImportFrom counts, including imports
inside functions and ``if`` blocks.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import ROOT

FORBIDDEN = {
    "ilr": ("interlock_project", "demo", "prove"),
    "approvals": ("interlock_project", "demo", "prove"),
    "demo": ("prove",),
}
"""Package -> the top-level packages none of its modules may import."""
PACKAGES = ("ilr", "approvals", "demo", "prove", "interlock_project")


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
    for app, forbidden in FORBIDDEN.items():
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT)
            package = ".".join(rel.parts[:-1])  # a module's package; an __init__'s own
            found = {m for m in imports_of(path.read_text(), package) if m.split(".")[0] in forbidden}
            # from a.b import c: keep a.b, drop the a.b.c spelling of the same import
            result.update((rel.as_posix(), m) for m in found if not any(m.startswith(o + ".") for o in found))
    return result


def test_the_walk_sees_every_kind_of_import():
    source = (
        "import os\nif True:\n    import interlock_project.settings\n"
        "def f():\n    from demo.workflows import target_for\n"
        "class C:\n    def g(self):\n        from .. import conf\n"
    )
    found = imports_of(source, "approvals.sub")
    assert {"interlock_project.settings", "demo.workflows", "demo.workflows.target_for", "approvals.conf"} <= found


def test_no_app_module_imports_the_project_or_the_harness():
    found = sorted(offenders())
    assert not found, f"ilr/approvals import the project, the demo or the harness, or the demo the harness: {found}"


# -- import cycles ---------------------------------------------------------------------------


def module_files() -> dict[str, Path]:
    """Every module of PACKAGES by dotted name (a package by its own name)."""
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the repository modules it imports (``from p import n`` counts p, and p.n when
    that is a module). A module importing a package it belongs to is not an edge: Python has
    initialised that package (or is initialising it) before the module runs."""
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for m in imports_of(path.read_text(), package):
            while m and m not in modules:
                m = m.rpartition(".")[0]
            if m and m != name and not name.startswith(m + "."):
                edges.add(m)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_one_held_by_a_function_level_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_package_has_an_import_cycle():
    modules = module_files()
    assert {"ilr._ops.runtime", "ilr._ops.grants", "approvals.services", "demo.refund", "prove.harness.runner"} <= set(
        modules
    )
    graph = import_graph(modules)
    assert "ilr._ops.runtime" in graph["ilr._ops.grants"] or "ilr._ops.grants" in graph["ilr._ops.runtime"]
    found = cycles(graph)
    assert not found, f"import cycles (each a set of modules importing one another): {found}"
