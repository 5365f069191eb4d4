"""No module of the repository is over 500 lines (issue 47), migrations aside: a module that
grows past it is split by what its parts do. Read from git's list of tracked files, so it needs
no collection and no database."""

from __future__ import annotations

import subprocess

from tests.support import ROOT

LIMIT = 500


def tracked_modules() -> list[str]:
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [p for p in out.stdout.splitlines() if "migrations" not in p.split("/")[:-1]]


def test_no_module_outside_migrations_is_over_500_lines():
    paths = tracked_modules()
    assert paths, "git ls-files found no .py file"
    lines = {p: len((ROOT / p).read_text().splitlines()) for p in paths if (ROOT / p).exists()}
    over = {p: n for p, n in sorted(lines.items()) if n > LIMIT}
    assert over == {}, f"modules over {LIMIT} lines: " + ", ".join(f"{p} ({n})" for p, n in over.items())
