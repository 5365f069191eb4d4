"""The review UI end to end in a real headless Chromium (issue 4).

The real stack: Django's live server (pytest-django's ``live_server``) on the test database,
``manage.py ilr_worker`` subprocesses, the local payment target and the model stub. A person
logs in, opens the queue, sees the approval request (what will be sent, the decision and its
premises, re-checked through the registered target), approves, and watches the
workflow complete with one refund in the target's ledger; then revokes a grant whose effect is
in flight and sees the ids that may still land; then reads a receipt. Screenshots of the queue,
the revoke and a receipt go to the test's tmp_path, or to $ILR_UI_SHOTS when set: results/ui/
is made by ``ILR_UI_SHOTS=results/ui python -m pytest tests/browser/test_approvals_e2e.py``, so the plain
test run leaves results/ untouched.

Chromium is Debian's ``chromium`` package driven by Playwright through ``executable_path``
(``playwright install`` is never run). ``demo --serve`` is checked separately: gunicorn serves
the review UI and the admin's static files, and the printed login works.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
from tests.support.queries.grants import REVOKED_AT_OF_GRANTS_BY_ID
from tests.support.refund_harness import refund_env, wait_for_request
from tests.support.waits import wait_for

PASSWORD = "e2e-only-password"

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def registered():
    """This process's target registry for one test (the live server re-checks premises through
    it); restored afterwards."""
    from ilr._effects.targets import _TARGETS, register_target

    saved = dict(_TARGETS)
    yield lambda target: register_target(target, check=False)
    _TARGETS.clear()
    _TARGETS.update(saved)


def test_review_ui_end_to_end(rt, workers, tmp_path, live_server, monkeypatch, registered):
    sync_playwright = browser_or_skip()
    from django.contrib.auth.models import User

    from demo.peers.targets_client import LocalRefunds

    # Playwright's sync API keeps an event loop in this thread; the ORM calls made here (none
    # after this line but the fixtures' teardown) would otherwise be refused as async-unsafe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    User.objects.create_superuser("ops-e2e", password=PASSWORD)
    shots = Path(os.environ.get("ILR_UI_SHOTS") or tmp_path / "ui")
    shots.mkdir(parents=True, exist_ok=True)

    with refund_env(tmp_path, tier=1) as env, sync_playwright() as pw:
        registered(LocalRefunds(env.target_url, name="local-refunds"))
        workers.start("A", lease_ttl=2, env=env.worker_env())
        case = env.case("e2e-1")
        rt.start("refund", "e2e-1", case)
        proposal = wait_for_request(rt, "e2e-1")["payload"]

        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)

            log_in(page, live_server.url, "ops-e2e", PASSWORD)

            # The queue: the request (what will be sent, the decision's model and reasoning) and
            # the premises, re-checked through the registered target.
            card = page.locator('article[data-workflow="e2e-1"]')
            card.wait_for()
            assert "$20.00" in card.locator('[data-field="amount"]').inner_text()
            assert "claude-haiku-4-5-20251001" in card.inner_text()
            assert card.locator(".reasoning").inner_text().strip()
            row = card.locator('tr[data-premise="refunded_by_others"]')
            assert row.locator("td").nth(1).inner_text() == "0"
            assert "every premise still holds" in card.locator(".premise-state").inner_text()
            assert "unavailable" not in card.inner_text()
            page.screenshot(path=str(shots / "queue.png"), full_page=True)

            # Approve, then watch the workflow complete.
            card.locator("button.approve").click()
            page.locator(".messages .success").wait_for()
            assert "as grant" in page.locator(".messages").inner_text()
            page.goto(f"{live_server.url}/review/cases/e2e-1/")
            deadline = time.monotonic() + 60
            while page.locator("#wf-status").inner_text() != "completed":
                assert time.monotonic() < deadline, page.locator("#wf-status").inner_text()
                time.sleep(0.5)
                page.reload()
            assert "COMMITTED" in page.locator("#wf-result").inner_text()
            refunds = env.ledger(case["payment"])
            assert [(r["amount"], r["source"]) for r in refunds] == [(proposal["amount"], "api")]

            # A receipt: verify()'s answers in words, the chain, no tamper flag.
            page.get_by_role("link", name="receipt", exact=True).first.click()
            page.wait_for_url(re.compile(r".*/review/receipts/eff_[0-9a-f]+/$"))
            answers = page.locator("table.answers").inner_text()
            # P5 is a plain "Yes" only for a signed journal (a checkout with no key pair signs none).
            signed = "signed with key" in page.locator("p.lede").inner_text()
            for code in ("P1", "P2", "P3", "P4", "P5"):
                expected = "Yes" if code != "P5" or signed else "Yes, but unsigned"
                assert page.locator(f'tr[data-answer="{code}"] td.verdict').inner_text() == expected, code
            assert "Did it happen?" in answers and "Is the record intact?" in answers
            assert "Intact" in page.locator("#tamper-flag").inner_text()
            assert page.locator("table.chain tbody tr").count() >= 3
            page.screenshot(path=str(shots / "receipt.png"), full_page=True)

            # Revoke a grant whose effect is in flight: the second case's worker dies right after
            # T_dispatch, so its effect stays dispatched under the grant.
            workers.kill("A")
            killed = workers.start("K", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_dispatch"))
            rt.start("refund", "e2e-2", env.case("e2e-2"))
            wait_for_request(rt, "e2e-2")
            page.goto(f"{live_server.url}/review/")
            page.locator('article[data-workflow="e2e-2"] button.approve').click()
            page.locator(".messages .success").wait_for()
            killed.wait(30)
            effect_id = wait_for(
                lambda: next(
                    (e["effect_id"] for e in rt.describe("e2e-2")["effects"] if e["state"] == "dispatched"), None
                ),
                message="a dispatched effect",
            )
            grant_id = rt.describe("e2e-2")["effects"][0]["grant_id"]

            page.goto(f"{live_server.url}/admin/ilr/grant/")
            page.locator(f'input[name="_selected_action"][value="{grant_id}"]').check()
            page.select_option('select[name="action"]', "revoke_selected")
            page.click('button[name="index"]')
            page.wait_for_url(re.compile(r".*/admin/ilr/grant/revoke/.*"))
            assert effect_id in page.inner_text("#content")
            page.click('input[type="submit"]')
            results = page.locator("#revoke-results")
            results.wait_for()
            assert "These may still land" in results.inner_text()
            assert page.locator("ul.landing li").all_inner_texts() == [f"{effect_id} (receipt)"]
            page.screenshot(path=str(shots / "revoke.png"), full_page=True)
        finally:
            browser.close()

    assert rt.connection().execute(REVOKED_AT_OF_GRANTS_BY_ID, (grant_id,)).fetchone()["revoked_at"] is not None
    assert (shots / "queue.png").stat().st_size > 10_000
    assert (shots / "receipt.png").stat().st_size > 10_000


def test_demo_serve_runs_gunicorn_with_the_review_ui(clean_db, tmp_path):
    from demo.peers.targets_client import http_json
    from tests.support.workers import WorkerProcs

    env = WorkerProcs(tmp_path).env()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "demo", "--serve", "--port", "0", "--serve-for", "60"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    try:
        deadline = time.monotonic() + 90
        while not any(line.startswith("Press Ctrl-C") for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(lines)
            lines.append(proc.stdout.readline())
        out = "".join(lines)
        base = re.search(r"Serving on (http://127\.0\.0\.1:\d+)", out).group(1)
        username, password = re.search(r"login:\s+(\S+) / (\S+)", out).groups()
        assert "waits for approval" in out
        assert http_json("GET", f"{base}/review/login/")[0] == 200
        assert http_json("GET", f"{base}/static/admin/css/base.css")[0] == 200  # the admin's CSS
        assert http_json("GET", f"{base}/admin/login/")[0] == 200
        from django.contrib.auth import authenticate
        from django.test import RequestFactory

        # django-axes (the login rate limit) needs the request it counts failures by.
        login = RequestFactory().post("/review/login/")
        assert username == "demo-reviewer" and authenticate(login, username=username, password=password) is not None
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0, "".join(lines) + proc.stdout.read()
