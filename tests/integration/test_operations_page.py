"""The admin's operations page (issue 46) through Django's test client, over a known state
(tests/support/ops_state.py): staff with the workflow view permission only, linked from the admin
index, every item linking to its admin page. In a real browser: tests/browser/test_operations_page.py."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from tests.support import ops_state
from tests.support.review import client_for, text, user

pytestmark = pytest.mark.usefixtures("transactional_db")


def test_the_page_lists_what_needs_a_person_with_links(rt):
    ops_state.seed(rt.connection())
    c = client_for(user("ops", "ilr.view_workflow", staff=True))
    index = c.get(reverse("admin:index"))
    assert index.status_code == 200 and reverse("admin:ilr_operations") in text(index)
    r = c.get(reverse("admin:ilr_operations"))
    body = text(r)
    assert r.status_code == 200
    for href in (
        reverse("admin:ilr_approvalrequest_change", args=[quote("apr_apr-old")]),
        reverse("admin:ilr_approvalrequest_change", args=[quote("apr_apr-new")]),
        reverse("admin:ilr_effect_change", args=[quote("eff_ops_amb")]),
        reverse("admin:ilr_workflow_change", args=[quote("stuck-1")]),
        reverse("admin:ilr_workflow_change", args=[quote("lapsed-1")]),
        reverse("admin:ilr_workflow_changelist") + "?name=refund&amp;version=v1",
    ):
        assert f'href="{href}"' in body, href
    # Django's admin quotes "_" in a key in its URLs (apr_x: apr_5Fx) and unquotes it in the view.
    assert "eff_ops_done" not in body  # reconciled: nothing left for a person
    assert "apr_apr-no" not in body  # rejected
    assert body.index("apr_apr-old") < body.index("apr_apr-new")  # oldest first
    assert 'data-figure="approvals-pending"><span class="value">2</span>' in body


def test_staff_only_and_the_view_permission(rt):
    url = reverse("admin:ilr_operations")
    assert client_for(user("nostaff", "ilr.view_workflow")).get(url).status_code == 302  # to the admin login
    assert client_for(user("noperm", staff=True)).get(url).status_code == 403
    index = client_for(user("noperm2", "ilr.view_grant", staff=True)).get(reverse("admin:index"))
    assert url not in text(index)
