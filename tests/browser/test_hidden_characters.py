"""Look-alike and invisible characters are shown as what they are (issue 40, item 3).

A bidirectional override (``acct_\u202e9876\u202c`` reads ``acct_6789``), a zero-width space
and a Cyrillic letter inside a Latin word are shown as escaped code points with a warning badge
wherever an approver reads a payload value, premise or summary: the review UI's request card and
case page, the admin's request page, and the receipt page. One filter (``reveal``) on every one
of them. Real PostgreSQL, a real ``ilr_worker`` running ``tests.support.flows.asks_approval``,
the real payment target, and the pages in Chromium.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
from tests.support.refund_harness import refund_env, wait_for_request
from tests.support.review import CYRILLIC, RLO, ZWSP

PASSWORD = "hidden-chars-password"


@pytest.mark.django_db(transaction=True)
def test_hidden_characters_are_shown_escaped_on_every_page_an_approver_reads(
    rt, workers, tmp_path, live_server, monkeypatch
):
    sync_playwright = browser_or_skip()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    alice = User.objects.create_user("alice", password=PASSWORD, is_staff=True, is_superuser=True)
    alice.user_permissions.add(Permission.objects.get(content_type__app_label="approvals", codename="approve"))
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env, sync_playwright() as pw:
        payment = env.case("hidden")["payment"]
        payload = {"payment": payment, "amount": 1000, "to": RLO, "memo": ZWSP, "bank": CYRILLIC}
        rt.start(
            "asks_approval",
            "hidden",
            {
                "url": env.target_url,
                "payment": payment,
                "key": "refund:hidden",
                "payload": payload,
                "summary": f"Refund to {RLO}",
            },
        )
        req = wait_for_request(rt, "hidden")

        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            log_in(page, live_server.url, "alice", PASSWORD)

            def check_card(card):
                head = card.locator(".card-head .id")
                assert "\\u202e" in head.inner_text() and head.locator(".hidden-chars").is_visible()
                for key, point in (("to", "\\u202e"), ("memo", "\\u200b"), ("bank", "\\u0430")):
                    cell = card.locator(f'[data-field="{key}"]')
                    assert point in cell.inner_text(), (key, cell.inner_text())
                    assert cell.locator(".hidden-chars").is_visible(), key
                assert card.locator('[data-field="payment"] .hidden-chars').count() == 0

            check_card(page.locator('article[data-workflow="hidden"]'))  # the queue
            page.goto(f"{live_server.url}/review/cases/hidden/")
            check_card(page.locator('article[data-workflow="hidden"]'))

            page.goto(f"{live_server.url}/admin/ilr/approvalrequest/{req['id']}/change/")
            body = page.locator("#content-main").inner_text()
            assert "\\u202e" in body and "\\u200b" in body and "\\u0430" in body, body
            assert page.locator("#content-main .hidden-chars").first.is_visible()

            rt.approve_request(req["id"], by="alice")
            effect_id = rt.result("hidden", timeout=30)["effect_id"]
            page.goto(f"{live_server.url}/review/receipts/{effect_id}/")
            facts = page.locator("#receipt-payload")
            assert "\\u202e" in facts.inner_text() and "\\u0430" in facts.inner_text(), facts.inner_text()
            assert facts.locator(".hidden-chars").is_visible()
        finally:
            browser.close()
