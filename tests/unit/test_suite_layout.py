"""The test suite's layout (issue 47): every test module sits in one of the folders of
tests/support/layout.py, what test modules share is in tests/support/ or a conftest.py (a test
module imports no other test module, nor a conftest), and the modules that drive Chromium are the
ones in tests/browser/. Read from the files, so it needs no collection."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.layout import FOLDERS, TESTS


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, anywhere in it, as a dotted name (relative imports
    resolved against its package)."""
    package = path.relative_to(TESTS.parent).with_suffix("").parts[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            found.add(module)
            # "from tests.unit import test_x" imports a module too
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def is_test_module(name: str) -> bool:
    last = name.rpartition(".")[2]
    return name.startswith("tests.") and (last.startswith("test_") or last == "conftest")


def test_every_test_module_sits_in_one_of_the_folders():
    outside = [
        p.relative_to(TESTS).as_posix()
        for p in TESTS.rglob("test_*.py")
        if p.relative_to(TESTS).parts[0] not in FOLDERS or len(p.relative_to(TESTS).parts) != 2
    ]
    assert outside == [], f"test modules outside tests/{{{','.join(FOLDERS)}}}/: {outside}"
    # Nothing else beside them but the conftest, the package marker and the support.
    top = {p.name for p in TESTS.iterdir() if p.name != "__pycache__"}
    assert top == {"__init__.py", "conftest.py", "support", *FOLDERS}, top


def test_no_test_module_imports_another_or_a_conftest():
    found = {
        p.relative_to(TESTS.parent).as_posix(): sorted(m for m in imported_modules(p) if is_test_module(m))
        for p in python_files()
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_the_modules_that_drive_chromium_are_the_ones_in_browser():
    drives = {
        p.relative_to(TESTS).as_posix()
        for p in TESTS.rglob("test_*.py")
        if "tests.support.browser" in imported_modules(p)
    }
    in_browser = {p.relative_to(TESTS).as_posix() for p in (TESTS / "browser").glob("test_*.py")}
    assert drives == in_browser
