"""The complete OpenAI Agents SDK agent of docs/guides/agent-frameworks.md runs, as the page
gives it, in a new user's Django project: the page's ``support/workflows.py`` copied verbatim
into an app of a project of its own (``tests.support.minimal_project``: the contrib apps, ``ilr``
and ``approvals``, nothing of this repository's settings) with a database of its own on the test
session's server, migrated, a real ``ilr_worker``, and the page's client steps: the run waits on
an approval request for the exact arguments, is approved, and the refund commits once. The
page's model is EMULATED (its ``Scripted`` SDK ``Model``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import uuid

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support import ROOT
from tests.support.minimal_project import write_settings
from tests.support.waits import wait_for

PAGE = ROOT / "docs" / "guides" / "agent-frameworks.md"


def page_workflows() -> str:
    """The ``support/workflows.py`` block of the page's OpenAI Agents SDK section."""
    section = PAGE.read_text().split("# Agents in the OpenAI Agents SDK", 1)[1]
    block = re.search(r"```python\n(# support/workflows\.py\n.*?)```", section, re.S)
    assert block, "the OpenAI Agents SDK section has no support/workflows.py block"
    return block.group(1)


@pytest.fixture
def project(test_dsn, tmp_path):
    """The project directory and its environment; its database is dropped at teardown."""
    name = f"oai_docs_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(test_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    parts = conninfo_to_dict(make_conninfo(test_dsn, dbname=name))
    database = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": name,
        "USER": parts.get("user", ""),
        "PASSWORD": parts.get("password", ""),
        "HOST": parts.get("host", ""),
        "PORT": parts.get("port", ""),
    }
    directory = tmp_path / "project"
    (directory / "support").mkdir(parents=True)
    settings = write_settings(directory, "settings", database)
    settings.write_text(settings.read_text() + 'INSTALLED_APPS += ["support"]\n')
    (directory / "support" / "__init__.py").write_text("")
    (directory / "support" / "workflows.py").write_text(page_workflows())
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join([str(directory), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "settings",
    }
    try:
        yield directory, env
    finally:
        with psycopg.connect(test_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


CLIENT = """
import json, time
import django
django.setup()
from ilr import Runtime

rt = Runtime()
rt.start("support_case", "case-1", {"id": "case-1", "ticket": "Refund pay_1: it arrived broken."})
deadline = time.monotonic() + 60
while not rt.approval_requests() and time.monotonic() < deadline:
    time.sleep(0.1)
req = rt.approval_requests()[0]
rt.approve_request(req["id"], by="alice")
result = rt.result("case-1", timeout=60)
print(json.dumps({"request": {k: req[k] for k in ("payload", "payload_hash", "premises", "summary")},
                  "result": result}))
"""


def test_the_pages_openai_agents_sdk_agent_runs_in_a_new_project(project):
    directory, env = project

    def django(*args, timeout=120):
        proc = subprocess.run(
            [sys.executable, "-m", "django", *args],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert proc.returncode == 0, f"django {args}: {proc.stdout}\n{proc.stderr}"
        return proc.stdout

    django("migrate", "-v", "0")
    log = open(directory / "worker.log", "wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "ilr_worker", "--id", "w1", "--poll", "0.1"],
        cwd=directory,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: b"running support_case@1" in (directory / "worker.log").read_bytes(),
            timeout=60,
            message="the worker serving support_case",
        )
        client = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(CLIENT)],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
            timeout=150,
            check=False,
        )
        assert client.returncode == 0, client.stderr + (directory / "worker.log").read_text()
        out = json.loads(client.stdout.strip().splitlines()[-1])
    finally:
        worker.kill()
        worker.wait(10)
        log.close()
    request, result = out["request"], out["result"]
    assert request["payload"] == {"amount": 2000, "payment": "pay_1"}
    assert request["premises"] == {"payment": "pay_1", "refundable": 5000}
    assert request["summary"] == "Refund 2000 cents of pay_1"
    assert [(o["tool"], o["status"]) for o in result["outcomes"]] == [
        ("lookup_payment", "ok"),
        ("issue_refund", "COMMITTED"),
    ]
    assert result["final_output"].startswith("Done: ") and '"status": "COMMITTED"' in result["final_output"]
