"""The admin's operations page (issue 46) in Chromium: a staff member with only the workflow
view permission logs in to the admin, follows the index's Operations link, reads the figures at a
glance, and follows each item that needs a person to its admin page. The state is written with
plain SQL (tests/support/ops_state.py, as tests/integration/test_reconcile.py writes an
ambiguous effect) on real PostgreSQL; the page and the admin are the real ones (live_server)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User

from tests.support import ops_state
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip

PASSWORD = "operations-page-password"


@pytest.mark.django_db(transaction=True)
def test_operations_page_figures_and_links_to_each_case(rt, live_server, monkeypatch):
    sync_playwright = browser_or_skip()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ops = User.objects.create_user("sre", password=PASSWORD, is_staff=True)
    ops.user_permissions.add(Permission.objects.get(content_type__app_label="ilr", codename="view_workflow"))
    for codename in ("view_approvalrequest", "view_effect"):
        ops.user_permissions.add(Permission.objects.get(content_type__app_label="ilr", codename=codename))
    ops_state.seed(rt.connection())
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            page.goto(f"{live_server.url}/admin/login/?next=/admin/")
            page.fill("#id_username", "sre")
            page.fill("#id_password", PASSWORD)
            page.click("input[type=submit]")
            page.wait_for_url(f"{live_server.url}/admin/")

            page.click("#operations-link a")
            page.wait_for_url(f"{live_server.url}/admin/ilr/workflow/operations/")
            assert page.locator("h1").inner_text() == "Operations"

            def figure(key: str) -> str:
                return page.locator(f'[data-figure="{key}"] .value').inner_text()

            assert figure("approvals-pending") == str(ops_state.PENDING_APPROVALS)
            assert figure("effects-ambiguous") == "1"
            assert figure("workflows-stuck") == "2"
            assert figure("versions-unserved") == "2"
            assert figure("schedules-overdue") == "1"
            # The figures that need a person are flagged; the quiet ones are not.
            assert "alert" in page.locator('[data-figure="approvals-pending"]').get_attribute("class")
            assert "alert" not in page.locator('[data-figure="workers-live"]').get_attribute("class")
            assert "oldest 2 min" in page.locator('[data-figure="approvals-pending"]').inner_text()

            rows = page.locator("#oldest-approvals tbody tr")
            assert rows.count() == 2 and "apr_apr-old" in rows.nth(0).inner_text()  # oldest first
            rows.nth(0).locator("a").first.click()
            page.wait_for_url("**/admin/ilr/approvalrequest/**/change/")
            assert "apr_apr-old" in page.locator("#content").inner_text()
            page.go_back()

            page.locator("#ambiguous-effects tbody a", has_text="eff_ops_amb").click()
            page.wait_for_url("**/admin/ilr/effect/**/change/")
            assert "eff_ops_amb" in page.locator("#content").inner_text()
            page.go_back()

            stuck = page.locator("#stuck-workflows tbody tr")
            assert stuck.count() == 2
            assert "CrashLoop" in page.locator("#stuck-workflows").inner_text()
            page.locator("#stuck-workflows tbody a", has_text="stuck-1").click()
            page.wait_for_url("**/admin/ilr/workflow/stuck-1/change/")
            assert "stuck" in page.locator("#content").inner_text()
            page.go_back()

            page.locator("#unserved-versions tbody a", has_text="refund@v1").click()
            page.wait_for_url("**/admin/ilr/workflow/?name=refund&version=v1")
            assert "due-0" in page.locator("#result_list").inner_text()
        finally:
            browser.close()
