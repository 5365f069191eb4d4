"""``examples/tasks_and_workflows`` (a Django task and a workflow in a project of its own) runs as
its README says, on the Django this suite has (6, or 5.2 with the django-tasks backport): a task
enqueued in a transaction that rolls back never exists, one that commits runs once, a worker
SIGKILLed mid-task is taken over and the task finishes once (its idempotent body ran twice, one
receipt), and the workflow completes.

The example is copied under tmp_path and run with this interpreter, its own ``manage.py`` and a
database of its own on the test session's server; ``PYTHONPATH`` is the checkout, so the
checkout's ``ilr`` is the one imported (tests/browser/test_example_project.py runs the other
example on the wheel in a fresh virtual environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.support import ROOT
from tests.support.db import database_url
from tests.support.waits import wait_for

EXAMPLE = ROOT / "examples" / "tasks_and_workflows"


@pytest.fixture
def shop_db(test_dsn):
    """A database of the example's own on the test session's server; dropped at teardown."""
    name = f"shop_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(test_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(test_dsn, dbname=name)
    finally:
        with psycopg.connect(test_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


class Shop:
    """The example copied under tmp_path; kills the workers it started."""

    def __init__(self, directory, database_url: str):
        self.dir = directory
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(directory.parent),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "shopsite.settings",
            "DATABASE_URL": database_url,
        }
        self.procs: dict[str, subprocess.Popen] = {}

    def manage(self, *args) -> str:
        proc = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.dir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, f"manage.py {args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout

    def json(self, *args) -> dict:
        return json.loads(self.manage(*args).strip().splitlines()[-1])

    def shell_json(self, code: str):
        return json.loads([line for line in self.manage("shell", "-c", code).splitlines() if line.startswith("{")][-1])

    def worker(self, name: str) -> subprocess.Popen:
        log = (self.dir.parent / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [sys.executable, "manage.py", "ilr_worker", "--id", name, "--lease-ttl", "3", "--poll", "0.2"],
            cwd=self.dir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        return self.procs[name]

    def log(self, name: str) -> str:
        return (self.dir.parent / f"{name}.log").read_text(errors="replace")

    def status(self, task_id: str) -> dict:
        return self.json("task_status", task_id)

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def shop(shop_db, tmp_path):
    directory = tmp_path / "tasks_and_workflows"
    shutil.copytree(EXAMPLE, directory, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".data"))
    s = Shop(directory, database_url(shop_db))
    try:
        probe = s.manage("shell", "-c", "import ilr; print(ilr.__file__)")
        assert probe.strip().splitlines()[-1] == str(ROOT / "ilr" / "__init__.py")
        s.manage("check", "--fail-level", "WARNING")
        s.manage("migrate", "--noinput")
        s.manage("makemigrations", "--check", "--dry-run")  # the example's migrations match its models
        yield s
    finally:
        s.kill_all()


def test_the_tasks_and_workflows_example_runs_as_its_readme_says(shop):
    rolled = shop.json("place_order", "rolled@example.com", "--rollback")
    assert rolled["committed"] is False and rolled["status"] == "READY"

    w1 = shop.worker("w1")
    wait_for(lambda: "running fulfil_order@1, task:default@1" in shop.log("w1"), timeout=60, message="w1's start")
    kept = shop.json("place_order", "ada@example.com")
    assert kept["committed"] is True
    done = wait_for(
        lambda: (s := shop.status(kept["task_id"]))["status"] == "SUCCESSFUL" and s, timeout=60, interval=0.3
    )
    assert done["return_value"] == {"order": kept["order"], "email": "ada@example.com", "receipt": 1, "created": True}
    assert done["attempts"] == 1 and done["worker_ids"] == ["w1"]
    # The rolled-back task never existed, and never ran.
    assert shop.status(rolled["task_id"])["status"] == "does not exist"

    slow = shop.json("place_order", "grace@example.com", "--slow", "4")
    runs = (
        "from shop.models import TaskRun; "
        f"print('{{\"n\": %d}}' % TaskRun.objects.filter(task_id={slow['task_id']!r}).count())"
    )
    wait_for(lambda: shop.shell_json(runs)["n"] == 1, timeout=60, message="the slow task's body to start")
    w1.kill()
    assert w1.wait(10) == -9
    shop.worker("w2")
    done = wait_for(
        lambda: (s := shop.status(slow["task_id"]))["status"] == "SUCCESSFUL" and s, timeout=90, interval=0.3
    )
    assert done["worker_ids"] == ["w2"] and done["return_value"]["created"] is True
    facts = shop.shell_json(f"""
import json
from shop.models import Order, Receipt, TaskRun
print(json.dumps({{"runs": TaskRun.objects.filter(task_id={slow["task_id"]!r}).count(),
                  "receipts": sorted(Receipt.objects.values_list("order__email", flat=True)),
                  "orders": sorted(Order.objects.values_list("email", flat=True))}}))
""")
    # At least once: the body ran on both workers; the receipt, keyed by its order, exists once.
    assert facts == {
        "runs": 2,
        "receipts": ["ada@example.com", "grace@example.com"],
        "orders": ["ada@example.com", "grace@example.com"],
    }

    started = shop.json("fulfil_order", str(slow["order"]))
    assert started == {"workflow_id": f"fulfil-{slow['order']}"}
    described = f"""
import json
from ilr import Runtime
from shop.models import Order
d = Runtime().describe({started["workflow_id"]!r})
order = Order.objects.get(pk={slow["order"]})
print(json.dumps({{"status": d["status"], "result": d["result"], "order": order.status}}))
"""
    wf = wait_for(lambda: (d := shop.shell_json(described))["status"] == "completed" and d, timeout=60, interval=0.3)
    assert wf == {"status": "completed", "result": {"order": slow["order"], "status": "shipped"}, "order": "shipped"}
    shop.manage("ilr_check")
