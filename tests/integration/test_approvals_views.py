"""The review UI and the admin through Django's test client (issue 4): every permission and every
bad input, each answered with a clear message or 403/404 and nothing written.

Rows are made with plain SQL on the emptied test database, as the runtime leaves a refund that
waits on its approval request (the workflow row sleeping on the request's signal, its decide and
request steps, the ilr.approval_requests row); nothing here needs a worker. Approve and reject
run the runtime's own transaction bodies. The ilr tables are written by other connections and
are not flushed by Django, so these tests use ``transactional_db`` and the ``rt`` fixture
(which truncates them).
"""

from __future__ import annotations

import json
import time

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from demo.workflows import REFUND_VERSION
from ilr import _codec as codec
from ilr._journal import receipts
from ilr._ops.approval_requests import signal_name
from tests.support.queries.effects import RECONCILED_OF_EFFECTS_BY_EFFECT_ID
from tests.support.queries.grants import ALL_LIFE_OF_GRANTS, COUNT_GRANTS, GRANTED_BY_OF_GRANTS
from tests.support.queries.journal import (
    DISABLE_JOURNAL_APPEND_ONLY,
    ENABLE_JOURNAL_APPEND_ONLY,
    TAMPER_JOURNAL_BODY_BY_EFFECT_ID_KIND,
)
from tests.support.queries.signals import ALL_OF_SIGNALS
from tests.support.queries.workflows import (
    ANALYZE_WORKFLOWS,
    SEED_WORKFLOWS_BULK,
    TAMPER_WORKFLOWS_STATUS_WAITING_RESULT_BY_ID,
)
from tests.support.review import (
    FACTS,
    approve_url,
    client_for,
    committed_journal,
    counts,
    make_effect,
    make_waiting,
    proposal_hash,
    reject_url,
    rid,
    sql,
    text,
    user,
)

pytestmark = pytest.mark.usefixtures("transactional_db")


# -- pages and their permissions ------------------------------------------------------------------


def test_login_required_and_no_permission_is_403(rt):
    make_waiting(rt)
    anon = Client()
    r = anon.get(reverse("approvals:queue"))
    assert r.status_code == 302 and r["Location"].startswith(reverse("approvals:login"))
    nobody = client_for(user("nobody"))
    for url in (reverse("approvals:queue"), reverse("approvals:ambiguous"), reverse("approvals:case", args=["case-1"])):
        r = nobody.get(url)
        assert r.status_code == 403 and "lacks the permission" in text(r)


def test_login_page_logs_a_reviewer_in(rt):
    user("carol", "approvals.review")
    c = Client(enforce_csrf_checks=True)
    page = c.get(reverse("approvals:login"))
    token = page.cookies["csrftoken"].value
    r = c.post(reverse("approvals:login"), {"username": "carol", "password": "pw", "csrfmiddlewaretoken": token})
    assert r.status_code == 302 and r["Location"] == reverse("approvals:queue")
    assert c.get(reverse("approvals:queue")).status_code == 200


def test_queue_shows_the_request_its_decision_and_unavailable_premises(rt, alice, registered):
    from demo.peers.targets_client import LocalRefunds

    make_waiting(rt)
    c = client_for(alice)
    body = text(c.get(reverse("approvals:queue")))
    # No target registered under the request's name: the page says so, and still offers the form.
    assert "Refund 20.00 of payment pay_1: arrived damaged" in body and "case-1" in body
    assert "$20.00" in body and "claude-haiku-4-5-20251001" in body
    assert "the item arrived damaged; refund the item price" in body
    assert "refunded_by_others" in body and "is not registered in this process" in body
    assert "Approve $20.00" in body and "expires in 23 hours" in body
    registered(LocalRefunds("http://127.0.0.1:9", name="local-refunds", read_timeout=0.5))  # nothing listens
    body = text(c.get(reverse("approvals:queue")))
    assert "Current values unavailable" in body and "ConnectionRefusedError" in body


def test_changed_premises_are_said_before_approving_and_after(rt, alice, registered, tmp_path):
    from demo.peers.target import target_process
    from demo.peers.targets_client import LocalRefunds, http_json

    with target_process(tier=1, ledger=tmp_path / "ledger.sqlite") as url:
        http_json("POST", f"{url}/admin/payments", {"id": "pay_1", "paid": 10_000})
        target = registered(LocalRefunds(url, name="local-refunds"))
        make_waiting(rt, facts=target.capture("pay_1"))
        c = client_for(alice)
        body = text(c.get(reverse("approvals:queue")))
        assert "every premise still holds" in body and "premises changed since" not in body
        http_json("POST", f"{url}/admin/hand_refund", {"payment": "pay_1", "amount": 1500})
        body = text(c.get(reverse("approvals:case", args=["case-1"])))
        assert "premises changed since the decision" in body
        assert "refunded_by_others of payment pay_1 was 0 cents when decided and is 1500 cents now" in body
        assert "Approve anyway (the send will be refused)" in body and "will refuse (stale premise)" in body
        r = c.post(approve_url(), {"payload_hash": proposal_hash()}, follow=True)
    page = text(r)
    assert "But the premises have changed" in page and "will refuse this send" in page
    assert '<li class="warning">' in page and '<li class="success">' not in page  # no green success


def test_review_only_user_sees_the_queue_but_every_action_is_403(rt):
    make_waiting(rt)
    make_effect(rt, "eff_amb", state="ambiguous")
    viewer = client_for(user("viewer", "approvals.review"))
    assert viewer.get(reverse("approvals:queue")).status_code == 200
    before = counts(rt)
    posts = [
        (approve_url(), {"payload_hash": proposal_hash()}),
        (reject_url(), {"reason": "no"}),
        (reverse("approvals:reconcile", args=["eff_amb"]), {"evidence": "ledger re_1", "applied": "yes"}),
    ]
    for url, data in posts:
        r = viewer.post(url, data)
        assert r.status_code == 403, url
        assert "approvals." in text(r)
    assert counts(rt) == before


def test_actions_are_post_only(rt, alice):
    make_waiting(rt)
    before = counts(rt)
    assert client_for(alice).get(approve_url()).status_code == 405
    assert counts(rt) == before


# -- approve, reject ---------------------------------------------------------------------------


def test_approve_issues_a_bound_grant_and_logs_it(rt, alice):
    proposal = make_waiting(rt)
    r = client_for(alice).post(approve_url(), {"payload_hash": proposal_hash(), "expires_in": "3600"}, follow=True)
    assert r.status_code == 200 and f"Approved {rid()} as grant" in text(r)
    grant = sql(rt, ALL_LIFE_OF_GRANTS).fetchone()
    assert grant["granted_by"] == "alice" and grant["payload_hash"] == codec.payload_hash(proposal)
    assert grant["facts_seen"] == FACTS and grant["max_cents"] == 2000 and grant["principal"] == "refund"
    assert 3590 < grant["life"].total_seconds() <= 3600
    signal = sql(rt, ALL_OF_SIGNALS).fetchone()
    assert signal["name"] == signal_name(rid()) and signal["sender"] == "alice"
    assert signal["payload"] == {"status": "approved", "grant_id": grant["id"], "by": "alice"}
    req = rt.approval_request(rid())
    assert req["status"] == "approved" and req["grant_id"] == grant["id"] and req["decided_by"] == "alice"
    log = list(LogEntry.objects.order_by("id").values_list("object_id", "change_message"))
    assert [o for o, _ in log] == ["case-1", grant["id"]]
    # The case page keeps the decision after it: outcome, approver, grant.
    page = text(client_for(alice).get(reverse("approvals:case", args=["case-1"])))
    assert "approved by alice" in page and grant["id"] in page and "the item arrived damaged" in page


def test_by_is_the_logged_in_user_never_a_form_field(rt, alice):
    make_waiting(rt)
    client_for(alice).post(approve_url(), {"payload_hash": proposal_hash(), "by": "mallory", "granted_by": "mallory"})
    assert sql(rt, GRANTED_BY_OF_GRANTS).fetchone()["granted_by"] == "alice"


def test_reject_sends_a_rejection_the_workflow_handles(rt, alice):
    make_waiting(rt)
    r = client_for(alice).post(
        reject_url(), {"reason": "customer already refunded by phone", "payload_hash": proposal_hash()}, follow=True
    )
    assert f"Rejected {rid()}" in text(r)
    signal = sql(rt, ALL_OF_SIGNALS).fetchone()
    assert signal["payload"] == {"status": "rejected", "by": "alice", "reason": "customer already refunded by phone"}
    assert sql(rt, COUNT_GRANTS).fetchone()["n"] == 0
    assert rt.approval_request(rid())["status"] == "rejected"
    assert LogEntry.objects.get().change_message.startswith("Rejected")


def test_reject_without_a_reason_writes_nothing(rt, alice):
    make_waiting(rt)
    before = counts(rt)
    r = client_for(alice).post(reject_url(), {"reason": "   "}, follow=True)
    assert "A rejection needs a reason." in text(r)
    assert counts(rt) == before


# -- bad input: forged, replayed, stale, two-person, unknown -------------------------------------------


def test_forged_post_without_csrf_token_is_403_and_writes_nothing(rt, alice):
    make_waiting(rt)
    c = client_for(alice, csrf=True)
    before = counts(rt)
    assert c.post(approve_url(), {"payload_hash": proposal_hash()}).status_code == 403
    c.get(reverse("approvals:queue"))  # sets a real csrf cookie; a forged token still fails
    r = c.post(approve_url(), {"payload_hash": proposal_hash(), "csrfmiddlewaretoken": "x" * 64})
    assert r.status_code == 403 and "CSRF" in text(r)
    assert counts(rt) == before


def test_replayed_post_is_refused_and_writes_nothing(rt, alice):
    make_waiting(rt)
    c = client_for(alice, csrf=True)
    c.get(reverse("approvals:queue"))
    data = {"payload_hash": proposal_hash(), "csrfmiddlewaretoken": c.cookies["csrftoken"].value}
    assert c.post(approve_url(), data).status_code == 302
    after_first = counts(rt)
    r = c.post(approve_url(), data, follow=True)  # the same request again, valid token and all
    assert "approved already" in text(r) and "Nothing was changed" in text(r)
    assert counts(rt) == after_first


def test_stale_approval_of_a_workflow_that_no_longer_waits(rt, alice):
    make_waiting(rt)
    page = client_for(alice).get(reverse("approvals:queue"))
    assert "case-1" in text(page)
    sql(rt, TAMPER_WORKFLOWS_STATUS_WAITING_RESULT_BY_ID)
    before = counts(rt)
    r = client_for(alice).post(approve_url(), {"payload_hash": proposal_hash()}, follow=True)
    assert "its workflow case-1 ended (completed)" in text(r)
    r = client_for(alice).post(reject_url(), {"reason": "late"}, follow=True)
    assert "its workflow case-1 ended (completed)" in text(r)
    assert counts(rt) == before


def test_approval_of_a_different_proposal_than_reviewed_is_refused(rt, alice):
    make_waiting(rt)
    before = counts(rt)
    r = client_for(alice).post(approve_url(), {"payload_hash": proposal_hash(amount=999)}, follow=True)
    assert "not the one you reviewed" in text(r)
    r = client_for(alice).post(approve_url(), {}, follow=True)
    assert "required" in text(r).lower()
    assert counts(rt) == before


def test_two_person_rule(rt, alice, bob):
    proposal = make_waiting(rt, amount=60_000, needed=2)
    a = client_for(alice)
    r = a.post(approve_url(), {"payload_hash": proposal_hash(60_000), "expires_in": "900"}, follow=True)
    assert "needs a second, different approver" in text(r)
    assert sql(rt, COUNT_GRANTS).fetchone()["n"] == 0
    assert [x["by"] for x in rt.approval_request(rid())["approvals"]] == ["alice"]
    page = text(a.get(reverse("approvals:queue")))
    assert "approved by alice" in page and "You approved: waiting for a second person" in page
    assert "two different approvers needed" in page
    # The same person again: refused, nothing written.
    before = counts(rt)
    r = a.post(approve_url(), {"payload_hash": proposal_hash(60_000)}, follow=True)
    assert "two-person rule" in text(r) and "Nothing was changed" in text(r)
    assert counts(rt) == before
    # A second, different person: the grant is issued now, with the shorter lifetime asked for.
    r = client_for(bob).post(approve_url(), {"payload_hash": proposal_hash(60_000), "expires_in": "86400"}, follow=True)
    assert "approvers: alice, bob" in text(r)
    grant = sql(rt, ALL_LIFE_OF_GRANTS).fetchone()
    assert grant["granted_by"] == "alice and bob" and grant["payload_hash"] == codec.payload_hash(proposal)
    assert grant["life"].total_seconds() <= 900


def test_one_approver_when_the_request_needs_one(rt, alice):
    make_waiting(rt, amount=60_000, needed=1)
    client_for(alice).post(approve_url(), {"payload_hash": proposal_hash(60_000)})
    assert sql(rt, GRANTED_BY_OF_GRANTS).fetchone()["granted_by"] == "alice"


def test_unknown_ids_are_404(rt, alice):
    c = client_for(alice)
    before = counts(rt)
    assert c.get(reverse("approvals:case", args=["no-such-case"])).status_code == 404
    assert c.post(approve_url("no-such-case"), {"payload_hash": proposal_hash()}).status_code == 404
    assert c.post(reject_url("no-such-case"), {"reason": "x"}).status_code == 404
    assert (
        c.post(reverse("approvals:reconcile", args=["eff_nope"]), {"evidence": "x", "applied": "yes"}).status_code
        == 404
    )
    assert c.get(reverse("approvals:receipt", args=["eff_nope"])).status_code == 404
    assert c.get(reverse("approvals:receipt_json", args=["eff_nope"])).status_code == 404
    assert counts(rt) == before


# -- reconcile ---------------------------------------------------------------------------------


def test_reconcile_requires_evidence_then_records_it(rt, alice):
    make_waiting(rt)
    make_effect(rt, "eff_amb", state="ambiguous")
    c = client_for(alice)
    page = text(c.get(reverse("approvals:ambiguous")))
    assert "eff_amb" in page
    before = counts(rt)
    for data in ({"evidence": "", "applied": "yes"}, {"evidence": "   ", "applied": "no"}):
        r = c.post(reverse("approvals:reconcile", args=["eff_amb"]), data, follow=True)
        assert "A reconcile needs evidence" in text(r)
    assert counts(rt) == before
    r = c.post(
        reverse("approvals:reconcile", args=["eff_amb"]),
        {"evidence": "ledger shows re_77", "applied": "yes"},
        follow=True,
    )
    assert "Reconciled eff_amb" in text(r)
    rec = sql(rt, RECONCILED_OF_EFFECTS_BY_EFFECT_ID).fetchone()["reconciled"]
    assert rec["evidence"] == "ledger shows re_77" and rec["by"] == "alice" and rec["applied"] is True
    assert LogEntry.objects.get().object_id == "eff_amb"
    # A second attestation does not silently replace the first.
    before = counts(rt)
    r = c.post(reverse("approvals:reconcile", args=["eff_amb"]), {"evidence": "other", "applied": "no"}, follow=True)
    assert "already reconciled by alice" in text(r)
    assert counts(rt) == before


def test_reconcile_of_an_effect_that_is_not_ambiguous_is_refused(rt, alice):
    make_waiting(rt)
    make_effect(rt, "eff_ok", state="committed")
    before = counts(rt)
    r = client_for(alice).post(
        reverse("approvals:reconcile", args=["eff_ok"]), {"evidence": "x", "applied": "yes"}, follow=True
    )
    assert "not ambiguous" in text(r)
    assert counts(rt) == before


# -- receipts ----------------------------------------------------------------------------------


def test_receipt_page_answers_p1_to_p5_and_downloads_the_bundle(rt, alice):
    make_waiting(rt)
    make_effect(rt, "eff_r", state="committed")
    committed_journal(rt)
    c = client_for(alice)
    body = text(c.get(reverse("approvals:receipt", args=["eff_r"])))
    for words in (
        "Did it happen?",
        "Did it happen exactly once?",
        "Was it authorized when it fired?",
        "Did its assumptions hold?",
        "Is the record intact?",
        "Intact:",
        "PROPOSED",
        "DISPATCHED",
        "COMMITTED",
    ):
        assert words in body, words
    assert "Tampering detected" not in body
    r = c.get(reverse("approvals:receipt_json", args=["eff_r"]))
    assert r["Content-Disposition"] == 'attachment; filename="receipt-eff_r.json"'
    bundle = json.loads(r.content)
    v = receipts.verify(bundle)
    # Unsigned (this process has no key): intact, but never tamper-evident without a trusted key.
    assert v["happened"] is True and v["chain_intact"] and v["authorized_when_fired"]


def test_receipt_page_flags_tampering(rt, alice):
    make_waiting(rt)
    make_effect(rt, "eff_r", state="committed")
    committed_journal(rt)
    # An administrator with table rights edits the journal behind the runtime's back.
    sql(rt, DISABLE_JOURNAL_APPEND_ONLY)
    try:
        sql(
            rt,
            TAMPER_JOURNAL_BODY_BY_EFFECT_ID_KIND,
        )
    finally:
        sql(rt, ENABLE_JOURNAL_APPEND_ONLY)
    body = text(client_for(alice).get(reverse("approvals:receipt", args=["eff_r"])))
    assert "Tampering detected" in body and "No: tampering detected" in body
    assert "hash does not recompute" in body


# -- 10,000 workflows -------------------------------------------------------------------------


def test_pages_stay_fast_with_10000_workflows(rt, alice):
    make_waiting(rt)
    sql(
        rt,
        SEED_WORKFLOWS_BULK,
        (REFUND_VERSION, json.dumps({"seq": 3, "kind": "signal", "signal": "go"})),
    )
    sql(rt, ANALYZE_WORKFLOWS)
    admin = client_for(User.objects.create_superuser("root", password="pw"))
    reviewer = client_for(alice)
    urls = [
        (admin, reverse("admin:ilr_workflow_changelist"), {}),
        (admin, reverse("admin:ilr_workflow_changelist"), {"status__exact": "sleeping"}),
        (admin, reverse("admin:ilr_workflow_changelist"), {"name": "refund", "version": REFUND_VERSION, "p": "40"}),
        (admin, reverse("admin:ilr_workflow_changelist"), {"q": "bulk-4242"}),
        (admin, reverse("admin:ilr_deployments"), {}),
        (reviewer, reverse("approvals:queue"), {"page": "50"}),
    ]
    for c, url, params in urls:
        c.get(url, params)  # warm up
        started = time.monotonic()
        r = c.get(url, params)
        elapsed = time.monotonic() - started
        assert r.status_code == 200, (url, params)
        assert elapsed < 1.5, (url, params, elapsed)
    assert "bulk-4242" in text(admin.get(reverse("admin:ilr_workflow_changelist"), {"q": "bulk-4242"}))


def test_the_case_page_says_which_key_a_workflow_holds_or_waits_for(rt, alice):
    rt.start("keyed", "key-holder", {"account": "acct:5"})
    rt.start("keyed", "key-waiter", {"account": "acct:5"})
    import re

    c = client_for(alice)

    def page(wf_id: str) -> str:  # the page's words, without its tags
        return re.sub(r"<[^>]+>", "", text(c.get(reverse("approvals:case", args=[wf_id]))))

    waiter = page("key-waiter")
    assert "acct:5: waiting, 1 in line, behind key-holder" in waiter
    assert "when a slot of acct:5 frees" in waiter
    assert "acct:5: holds slot 0; 1 waiting behind" in page("key-holder")
