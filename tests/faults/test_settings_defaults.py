"""A Django project that defines none of the ``ILR_*`` settings runs the ``payouts.py`` example
of docs/guides/targets.md as a new user would, and it commits its effect: real worker subprocesses. The defaults
themselves are in tests/unit/test_settings_defaults.py."""

from __future__ import annotations

import re
import subprocess
import sys

from django.conf import settings

from tests.support import ROOT
from tests.support.minimal_project import write_settings
from tests.support.waits import wait_for

TARGETS_GUIDE = ROOT / "docs" / "guides" / "targets.md"


def guide_block(starts: str) -> str:
    """The python code block of docs/guides/targets.md whose first line starts with ``starts``:
    the very code a user copies from the page."""
    blocks = re.findall(r"```python\n(.*?)```", TARGETS_GUIDE.read_text(), re.S)
    (block,) = [b for b in blocks if b.startswith(starts)]
    return block


def test_guide_payouts_example_runs_on_a_project_without_ilr_settings(workers, rt, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    db = settings.DATABASES["default"]
    database = {
        "ENGINE": "django.db.backends.postgresql",
        **{k: db[k] for k in ("NAME", "USER", "PASSWORD", "HOST", "PORT") if db.get(k)},
    }
    write_settings(project, "payouts_settings", database)
    (project / "payouts.py").write_text(guide_block("# payouts.py"))
    log = tmp_path / "pay1.log"
    env = workers.env({"DJANGO_SETTINGS_MODULE": "payouts_settings", "PYTHONPATH": str(project)})
    for name in ("ILR_DATA_DIR", "ILR_DB_NAME", "DATABASE_URL"):
        env.pop(name, None)
    workers.procs["pay1"] = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "django",
            "ilr_worker",
            "--id",
            "pay1",
            "--import",
            "payouts",
            "--lease-ttl",
            "3",
            "--poll",
            "0.1",
        ],
        cwd=project,
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    wait_for(
        lambda: "running payout@1" in log.read_text() or workers.procs["pay1"].poll() is not None,
        timeout=60,
        message="the worker's startup line",
    )
    assert "running payout@1" in log.read_text(), log.read_text()

    exec(guide_block("grant = rt.grant("), {"rt": rt})
    assert rt.result("p-1", timeout=60)["status"] == "COMMITTED", log.read_text()
