"""Issue 40, item 11: an expired approval is a normal outcome, shown with a neutral badge in the
case's timeline (not a red "error"). Real PostgreSQL, a real ``ilr_worker`` running
``tests.support.flows.asks_approval``, and the case page in Chromium."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Permission, User

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
from tests.support.refund_harness import refund_env

PASSWORD = "timeline-password"


@pytest.mark.django_db(transaction=True)
def test_an_expired_approval_reads_as_expired_not_as_an_error(rt, workers, tmp_path, live_server, monkeypatch):
    sync_playwright = browser_or_skip()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    u = User.objects.create_user("alice", password=PASSWORD)
    u.user_permissions.add(Permission.objects.get(content_type__app_label="approvals", codename="approve"))
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env, sync_playwright() as pw:
        payment = env.case("expiring")["payment"]
        rt.start(
            "asks_approval",
            "expiring",
            {"url": env.target_url, "payment": payment, "amount": 1000, "key": "refund:expiring", "timeout": 1},
        )
        assert rt.result("expiring", timeout=60)["status"] == "expired"
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            log_in(page, live_server.url, "alice", PASSWORD)
            page.goto(f"{live_server.url}/review/cases/expiring/")
            timeline = page.locator("h2:has-text('Step timeline') + .card tbody tr")
            row = timeline.filter(has=page.locator("td:nth-child(2)", has_text=re.compile(r"^signal$")))
            assert row.count() == 1, page.locator("h2 + .card").all_inner_texts()
            badge = row.locator(".badge")
            assert badge.inner_text() == "expired", badge.inner_text()
            assert "bad" not in (badge.get_attribute("class") or "").split()
            assert page.locator("table .badge.bad").count() == 0
        finally:
            browser.close()
