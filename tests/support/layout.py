"""Where a test module sits, by what its tests need; the folder is what marks a test slow."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
FOLDERS = {
    "unit": "no database: pure code, and the small local servers (target, fault proxy, model stub)",
    "integration": "the test database, in-process: a Runtime, the Django test client, plain SQL",
    "faults": "worker subprocesses, servers, clusters, SIGKILL and SIGSTOP, Temporal, DBOS, TLC, long runs",
    "browser": "the review UI in Chromium, driven by Playwright",
}
"""Every test module sits in one of these folders of tests/, by what its tests need."""
SLOW_FOLDERS = ("faults", "browser")
"""Their tests are marked ``slow``: the full suite runs them, the quick lane (-m "not slow") does not."""
SLOW_FIXTURES = ("workers", "live_server")
"""A test that starts worker subprocesses or a live server belongs in a slow folder."""
DB_FIXTURES = ("db", "transactional_db", "django_db_setup", "test_dsn", "clean_db", "rt")
"""A test that reaches the database does not belong in unit/."""


def folder_of(path: Path) -> str | None:
    """The first folder below tests/ of ``path`` (a file's name if it sits in tests/ itself), or
    None outside tests/."""
    try:
        return Path(path).resolve().relative_to(TESTS).parts[0]
    except ValueError:
        return None


def misplaced(item) -> str | None:
    """Why the collected test ``item`` is in the wrong folder, or None."""
    folder = folder_of(item.path)
    if folder is None:
        return None
    fixtures = set(getattr(item, "fixturenames", ()))
    if folder not in FOLDERS:
        return f"is not in one of the folders {', '.join(f'tests/{f}/' for f in FOLDERS)}"
    if folder not in SLOW_FOLDERS and (fixtures.intersection(SLOW_FIXTURES) or item.get_closest_marker("slow")):
        return "starts workers or a live server (or is marked slow): it belongs in tests/faults/ or tests/browser/"
    if folder == "unit" and (fixtures.intersection(DB_FIXTURES) or item.get_closest_marker("django_db")):
        return "uses the database: it belongs in tests/integration/"
    return None
