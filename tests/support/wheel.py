"""This repository's wheel, built for real (``pip wheel --no-build-isolation``) from a copy of the
sources, so the build leaves no build/ or egg-info directory in the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import ROOT

PACKAGES = ["approvals", "ilr"]
NOT_SHIPPED = ["interlock_project", "demo", "prove", "tests"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")


def build_wheel(tmp: Path) -> Path:
    """Build this repository's wheel under ``tmp`` from a copy of the sources (the checkout
    gets no build/ or egg-info directory); return the wheel's path."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for pkg in PACKAGES + NOT_SHIPPED:
        shutil.copytree(ROOT / pkg, src / pkg, ignore=IGNORE)
    out = tmp / "dist"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-cache-dir",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (whl,) = out.glob("interlock-*.whl")
    return whl
