"""What more than one test module uses, and nothing that is a test.

Test modules import from here (or get fixtures from a conftest.py), never from each other or from
a conftest. ``python3 -m tests.support.real_pg`` is the real-server lane's entry point.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: manage.py, pyproject.toml, the apps."""
