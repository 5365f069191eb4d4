"""Input gaps (issue 40, item 9): a 200 kB payload field is folded on the review page and the
approve button stays on screen. Real PostgreSQL, a real worker subprocess, the page in Chromium.
The rest of the item is in tests/integration/test_input_gaps.py.
"""

from __future__ import annotations

import pytest


@pytest.mark.django_db(transaction=True)
def test_a_200_kb_payload_field_is_folded_and_the_approve_button_stays_on_screen(
    rt, workers, tmp_path, live_server, monkeypatch
):
    """A 200 KB value under one key: the card folds it (a scrolled box of bounded height), the
    whole value is still there to read, and the Approve button is in the first screen."""
    from django.contrib.auth.models import Permission, User

    from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
    from tests.support.refund_harness import refund_env, wait_for_request

    sync_playwright = browser_or_skip()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    alice = User.objects.create_user("alice", password="fold-password")
    alice.user_permissions.add(Permission.objects.get(content_type__app_label="approvals", codename="approve"))
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env, sync_playwright() as pw:
        payment = env.case("long")["payment"]
        note = "note " * 40_000  # 200 KB
        rt.start(
            "asks_approval",
            "long",
            {
                "url": env.target_url,
                "payment": payment,
                "key": "refund:long",
                "payload": {"payment": payment, "amount": 1000, "note": note},
            },
        )
        wait_for_request(rt, "long")
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            log_in(page, live_server.url, "alice", "fold-password")
            for path in ("/review/", "/review/cases/long/"):
                page.goto(live_server.url + path)
                card = page.locator('article[data-workflow="long"]')
                card.wait_for()
                button = card.locator("button.approve")
                box = button.bounding_box()
                assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 900, (path, box)
                cell = card.locator('[data-field="note"]')
                assert cell.bounding_box()["height"] <= 400, (path, cell.bounding_box())
                assert cell.evaluate("e => e.scrollHeight > e.clientHeight")  # folded, scrolls
                assert len(cell.text_content()) >= len(note)  # all of it, nothing cut
        finally:
            browser.close()
        rt.cancel("long", by="tests")
