"""The admin of the ilr tables through Django's test client (issue 4): read-only tables, a
sleeping-forever workflow and an unreadable recovery said in words, grants created and revoked,
cancel, resume and retire behind their permissions and confirmations. The review UI's own pages
are tests/integration/test_approvals_views.py.

Rows are made with plain SQL on the emptied test database or by the runtime's own transaction
bodies; nothing here needs a worker. The ilr tables are written by other connections and are not
flushed by Django, so these tests use ``transactional_db`` and the ``rt`` fixture (which
truncates them).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from demo.workflows import REFUND_VERSION
from tests.support.queries.grants import ALL_LIFE_OF_GRANTS, COUNT_GRANTS, REVOKED_AT_REVOKED_BY_OF_GRANTS
from tests.support.queries.journal import COUNT_JOURNAL, MIN_SEQ_OF_JOURNAL
from tests.support.queries.workflows import (
    SEED_WORKFLOWS_CASE_1_1,
    SET_WORKFLOWS_STATUS_WAITING_BY_ID,
    SET_WORKFLOWS_WAITING_BY_ID,
    STATUS_ERROR_OF_WORKFLOWS_BY_ID,
)
from tests.support.review import (
    client_for,
    committed_journal,
    counts,
    make_effect,
    make_waiting,
    sql,
    text,
    user,
)

pytestmark = pytest.mark.usefixtures("transactional_db")


def admin_client(*perms):
    return client_for(user("ops", "ilr.view_workflow", "ilr.view_grant", "ilr.view_effect", *perms, staff=True))


def test_admin_shows_a_sleeping_forever_workflow(rt):
    make_waiting(rt)  # available_at = 'infinity'
    c = admin_client()
    r = c.get(reverse("admin:ilr_workflow_changelist"))
    assert r.status_code == 200 and "never by itself" in text(r)
    r = c.get(reverse("admin:ilr_workflow_change", args=["case-1"]))
    body = text(r)
    assert (
        r.status_code == 200
        and "never by itself" in body
        and "pick_amount" in body
        and "approval_request:refund:case-1" in body
    )
    r = c.get(reverse("admin:ilr_workflow_changelist"), {"status__exact": "sleeping", "q": "case-"})
    assert r.status_code == 200 and "case-1" in text(r)


def test_admin_says_when_recovery_could_not_read_the_target(rt):
    make_waiting(rt, status="pending")
    sql(
        rt,
        SET_WORKFLOWS_WAITING_BY_ID,
        (
            json.dumps(
                {
                    "seq": 2,
                    "kind": "effect",
                    "effect_id": "eff_1",
                    "until": "2026-11-30T05:00:00+00:00",
                    "lookup_attempt": 3,
                    "lookup_error": "ConnectionRefusedError: [Errno 111] Connection refused",
                }
            ),
        ),
    )
    r = admin_client().get(reverse("admin:ilr_workflow_changelist"))
    assert r.status_code == 200
    assert "effect lookup, attempt 3 failed: ConnectionRefusedError: [Errno 111] Connection refused" in text(r)


def test_admin_ilr_tables_are_read_only(rt):
    make_waiting(rt)
    make_effect(rt, "eff_1", state="committed")
    committed_journal(rt, "eff_1")
    c = client_for(User.objects.create_superuser("root", password="pw"))
    seq = sql(rt, MIN_SEQ_OF_JOURNAL).fetchone()["s"]
    assert c.get(reverse("admin:ilr_journalentry_change", args=[seq])).status_code == 200
    for name in ("journalentry", "effect", "signal", "workflow", "llmcall", "response", "slot"):
        assert c.get(reverse(f"admin:ilr_{name}_changelist")).status_code == 200, name
        assert c.get(reverse(f"admin:ilr_{name}_add")).status_code == 403, name
    assert c.post(reverse("admin:ilr_journalentry_delete", args=[seq]), {"post": "yes"}).status_code == 403
    assert c.post(reverse("admin:ilr_journalentry_change", args=[seq]), {"kind": "COMMITTED"}).status_code == 403
    assert sql(rt, COUNT_JOURNAL).fetchone()["n"] == 3


def test_admin_shows_who_holds_a_key_and_who_waits(rt):
    """The slots list and a queued workflow's page: its key, its place, the holder."""
    rt.start("keyed", "k-hold", {"account": "acct:9"})
    rt.start("keyed", "k-wait", {"account": "acct:9"})
    c = client_for(User.objects.create_superuser("root", password="pw"))
    body = text(c.get(reverse("admin:ilr_slot_changelist"), {"q": "acct:9"}))
    assert "holding slot 0" in body and "queued" in body and "k-hold" in body and "k-wait" in body
    assert "k-wait" in text(c.get(reverse("admin:ilr_slot_changelist"), {"state": "queued"}))
    assert "k-hold" not in text(c.get(reverse("admin:ilr_slot_changelist"), {"state": "queued"}))
    assert "a slot of concurrency key acct:9" in text(c.get(reverse("admin:ilr_workflow_changelist")))
    page = text(c.get(reverse("admin:ilr_workflow_change", args=["k-wait"])))
    assert "queued" in page and "k-hold (holds)" in page
    assert "when a slot of acct:9 frees" in page and "waits for a signal" not in page
    assert c.get(reverse("admin:ilr_slot_add")).status_code == 403


def test_admin_slots_page_shows_each_queue_with_its_rule_and_depth(rt, settings):
    settings.ILR_QUEUES = {"two_at_a_time": {"concurrency": 2}, "three_per_second": {"rate": "3/s"}}
    for i in range(3):
        rt.start("in_two_at_a_time", f"q-{i}", {})
    c = client_for(User.objects.create_superuser("root", password="pw"))
    body = text(c.get(reverse("admin:ilr_slot_changelist")))
    import re

    row = re.search(r"<tr><td><a [^>]*>two_at_a_time</a></td>(.*?)</tr>", body, re.S).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[:5] == ["2", "—", "—", "2", "1"], cells  # concurrency, rate, per key, holding, waiting
    assert ">three_per_second</a>" in body and "3/s" in body


def test_admin_grant_create_needs_permission_and_records_the_user(rt):
    c = admin_client()
    before = counts(rt)
    assert c.get(reverse("admin:ilr_grant_add")).status_code == 403
    assert c.post(reverse("admin:ilr_grant_add"), {"principal": "refund", "action": "refund"}).status_code == 403
    assert counts(rt) == before
    User.objects.get(username="ops").user_permissions.add(Permission.objects.get(codename="grant"))
    c = client_for(User.objects.get(username="ops"))
    r = c.post(
        reverse("admin:ilr_grant_add"),
        {
            "principal": "refund",
            "action": "refund",
            "max_cents": "5000",
            "expires_in_hours": "2",
            "granted_by": "mallory",
        },
    )
    assert r.status_code == 302, text(r)
    g = sql(rt, ALL_LIFE_OF_GRANTS).fetchone()
    assert g["granted_by"] == "ops" and g["max_cents"] == 5000 and 7190 < g["life"].total_seconds() <= 7200
    log = LogEntry.objects.get()
    assert log.object_id == g["id"] and log.user.username == "ops"
    r = c.post(reverse("admin:ilr_grant_add"), {"principal": "refund", "action": "refund", "max_cents": "-1"})
    assert r.status_code == 200 and "non-negative" in text(r)
    assert sql(rt, COUNT_GRANTS).fetchone()["n"] == 1


def test_admin_revoke_confirms_then_lists_the_effects_that_may_still_land(rt):
    make_waiting(rt)
    grant = rt.grant("refund", "refund", by="policy")
    make_effect(rt, "eff_flying", state="dispatched", grant_id=grant)
    c = admin_client()
    changelist = reverse("admin:ilr_grant_changelist")
    before = counts(rt)
    r = c.post(changelist, {"action": "revoke_selected", "_selected_action": [grant]})
    assert r.status_code == 200 and "revoke_selected" not in text(r)  # the action is not offered
    assert c.get(reverse("admin:ilr_grant_revoke"), {"ids": grant}).status_code == 403
    assert c.post(reverse("admin:ilr_grant_revoke"), {"ids": grant, "confirm": "yes"}).status_code == 403
    assert counts(rt) == before
    c = admin_client_with_revoke()
    r = c.post(changelist, {"action": "revoke_selected", "_selected_action": [grant]})
    assert r.status_code == 302 and "/revoke/" in r["Location"]
    confirm = c.get(r["Location"])
    assert confirm.status_code == 200 and "eff_flying" in text(confirm) and "Yes, revoke 1 grant" in text(confirm)
    assert counts(rt) == before  # the confirmation page writes nothing
    done = c.post(reverse("admin:ilr_grant_revoke"), {"ids": grant, "confirm": "yes"})
    assert done.status_code == 200 and "These may still land" in text(done) and "eff_flying" in text(done)
    revoked = sql(rt, REVOKED_AT_REVOKED_BY_OF_GRANTS).fetchone()
    assert revoked["revoked_at"] is not None and revoked["revoked_by"] == "ops"
    assert "eff_flying" in LogEntry.objects.get().change_message
    assert c.get(reverse("admin:ilr_grant_revoke"), {"ids": "grant_nope"}).status_code == 404
    # The confirmation page of a revoked grant names who revoked it; confirming again (a second
    # tab, say) is refused on the page, and nothing is written: not the grant, not a LogEntry.
    confirm = text(c.get(reverse("admin:ilr_grant_revoke"), {"ids": grant}))
    assert "already revoked" in confirm and "by ops" in confirm
    assert "Yes, revoke" not in confirm and "nothing to revoke" in confirm
    again = c.post(reverse("admin:ilr_grant_revoke"), {"ids": grant, "confirm": "yes"})
    assert again.status_code == 200 and "already revoked by ops" in text(again) and "Revoked 1 grant" not in text(again)
    assert again.context_data["title"] == "Not revoked"
    assert sql(rt, REVOKED_AT_REVOKED_BY_OF_GRANTS).fetchone() == revoked
    assert LogEntry.objects.count() == 1
    # Found by who revoked it; an id no grant can have is a 404, not a database error.
    assert grant in text(c.get(reverse("admin:ilr_grant_changelist"), {"q": "ops"}))
    assert c.get(reverse("admin:ilr_grant_revoke"), {"ids": "a\x00b"}).status_code == 404


def admin_client_with_revoke():
    u = User.objects.get(username="ops")
    u.user_permissions.add(Permission.objects.get(codename="revoke", content_type__app_label="approvals"))
    return client_for(User.objects.get(username="ops"))


def test_admin_cancel_needs_permission_and_confirmation(rt):
    make_waiting(rt)
    c = admin_client()
    before = counts(rt)
    assert c.get(reverse("admin:ilr_workflow_cancel"), {"ids": "case-1"}).status_code == 403
    assert counts(rt) == before
    u = User.objects.get(username="ops")
    u.user_permissions.add(Permission.objects.get(codename="cancel", content_type__app_label="approvals"))
    c = client_for(User.objects.get(username="ops"))
    assert "Yes, cancel 1 workflow" in text(c.get(reverse("admin:ilr_workflow_cancel"), {"ids": "case-1"}))
    assert counts(rt) == before
    c.post(reverse("admin:ilr_workflow_cancel"), {"ids": "case-1", "confirm": "yes"})
    assert counts(rt)["cancels"] == 1 and LogEntry.objects.count() == 1
    assert c.get(reverse("admin:ilr_workflow_cancel"), {"ids": "nope"}).status_code == 404


def test_admin_terminate_needs_permission_a_reason_and_confirmation(rt):
    """The page names each running child and its parent close policy; a confirm without a reason
    changes nothing; with one, the workflow ends terminated, its pending approval request is
    withdrawn (status cancelled), and one LogEntry names the reason."""
    make_waiting(rt)
    sql(
        rt,
        SEED_WORKFLOWS_CASE_1_1,
        (REFUND_VERSION,),
    )
    page = reverse("admin:ilr_workflow_terminate")
    c = admin_client()
    assert c.get(page, {"ids": "case-1"}).status_code == 403
    User.objects.get(username="ops").user_permissions.add(
        Permission.objects.get(codename="terminate", content_type__app_label="approvals")
    )
    c = client_for(User.objects.get(username="ops"))
    shown = text(c.get(page, {"ids": "case-1"}))
    assert "Yes, terminate 1 workflow" in shown and "case-1/1" in shown and "abandon" in shown
    before = counts(rt)
    assert "reason: say why" in text(c.post(page, {"ids": "case-1", "confirm": "yes", "reason": "  "}))
    assert counts(rt) == before and rt.describe("case-1")["status"] == "sleeping"
    c.post(page, {"ids": "case-1", "confirm": "yes", "reason": "duplicate case"})
    row = sql(rt, STATUS_ERROR_OF_WORKFLOWS_BY_ID).fetchone()
    assert row["status"] == "terminated" and row["error"]["reason"] == "duplicate case"
    assert row["error"]["by"] == "ops"
    assert [r["status"] for r in rt.approval_requests(status=None) if r["workflow_id"] == "case-1"] == ["cancelled"]
    assert rt.describe("case-1/1")["status"] == "sleeping"
    (entry,) = LogEntry.objects.all()
    assert entry.change_message == "Terminated: duplicate case. Children: case-1/1: abandoned."
    c.post(page, {"ids": "case-1", "confirm": "yes", "reason": "again"})  # ended: nothing to do, no entry
    assert LogEntry.objects.count() == 1


def test_admin_cancel_and_resume_pages_take_an_id_with_a_nul_as_no_such_workflow(rt):
    """A NUL cannot be in a workflow id (the database refuses it in text): such an id finds
    nothing (404), as on the revoke page, instead of a database error (500)."""
    make_waiting(rt)
    c = admin_client("approvals.cancel", "approvals.resume", "approvals.terminate")
    for page in ("admin:ilr_workflow_cancel", "admin:ilr_workflow_resume", "admin:ilr_workflow_terminate"):
        assert c.get(reverse(page), {"ids": "a\x00b"}).status_code == 404, page
        assert c.get(reverse(page), {"ids": ["case-1", "a\x00b"]}).status_code == 200, page


def test_admin_retire_shows_the_drain_report(rt):
    make_waiting(rt)
    make_waiting(rt, "case-2")
    sql(rt, SET_WORKFLOWS_STATUS_WAITING_BY_ID)
    c = admin_client()
    page = text(c.get(reverse("admin:ilr_deployments")))
    assert f"refund@{REFUND_VERSION}" in page and "Oldest still active" in page and "case-1" in page
    assert (
        c.get(reverse("admin:ilr_deployment_retire"), {"name": "refund", "version": REFUND_VERSION}).status_code == 403
    )
    u = User.objects.get(username="ops")
    u.user_permissions.add(Permission.objects.get(codename="retire", content_type__app_label="approvals"))
    c = client_for(User.objects.get(username="ops"))
    confirm = text(c.get(reverse("admin:ilr_deployment_retire"), {"name": "refund", "version": REFUND_VERSION}))
    assert "sleeping" in confirm and "completed" in confirm and "case-1" in confirm
    assert counts(rt)["retired"] == 0
    r = c.post(
        reverse("admin:ilr_deployment_retire"),
        {"name": "refund", "version": REFUND_VERSION, "confirm": "yes"},
        follow=True,
    )
    assert "takes no new starts" in text(r) and "sleeping: 1" in text(r)
    assert counts(rt)["retired"] == 1 and "Drain report" in LogEntry.objects.get().change_message
    before = counts(rt)
    r = c.post(
        reverse("admin:ilr_deployment_retire"),
        {"name": "refund", "version": REFUND_VERSION, "confirm": "yes"},
        follow=True,
    )
    assert "already retired" in text(r)
    assert counts(rt) == before
    assert c.get(reverse("admin:ilr_deployment_retire"), {"name": "refund", "version": "0"}).status_code == 404
