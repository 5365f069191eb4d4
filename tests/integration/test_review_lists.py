"""The review UI's case list by outcome, the admin's outcome filter, the receipt's facts (its case,
amount, approvers and the provider's reference) and the one timestamp format (issue 20, item 5).

Rows are written as the runtime leaves them (tests.support.review); approvals go
through the runtime's own transaction body (``rt.approve_request``).
"""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals import cases as case_lists
from ilr._journal import journal
from tests.support.queries.deployments import SEED_DEPLOYMENTS_OTHER
from tests.support.queries.effects import (
    SET_EFFECTS_RECONCILED_BY_EFFECT_ID,
    SET_EFFECTS_SENDS_FIRST_DISPATCHED_AT_BY_EFFECT_ID,
)
from tests.support.queries.workflows import SEED_WORKFLOWS_OTHER
from tests.support.review import (
    approve_url,
    client_for,
    counts,
    make_effect,
    make_waiting,
    proposal_hash,
    rid,
    sql,
    text,
    user,
)

pytestmark = pytest.mark.usefixtures("transactional_db")


def make_workflow(rt, wf_id: str, status: str):
    sql(
        rt,
        SEED_DEPLOYMENTS_OTHER,
    )
    sql(
        rt,
        SEED_WORKFLOWS_OTHER,
        (wf_id, status, json.dumps({"type": "ValueError", "message": "boom"}) if status != "completed" else None),
    )


def refuse(rt, effect_id: str):
    """A REFUSED entry beside an effect left proposed, as a refusal at dispatch leaves it."""
    conn = rt.connection()
    with conn.transaction():
        cur = conn.cursor()
        ts = cur.execute("select extract(epoch from now())::float8 as t").fetchone()["t"]
        journal.append(cur, effect_id, "PROPOSED", ts, {"effect": {"payment": "pay_1", "amount": 2000}})
        journal.append(cur, effect_id, "REFUSED", ts, {"reason": "stale premise", "violations": ["paid changed"]})


@pytest.fixture
def every_outcome(rt):
    """One case per outcome, and one that needs nobody."""
    make_waiting(rt, "case-waiting")
    make_workflow(rt, "case-refused", "completed")
    make_effect(rt, "eff_refused", wf_id="case-refused", state="proposed")
    sql(rt, SET_EFFECTS_SENDS_FIRST_DISPATCHED_AT_BY_EFFECT_ID)
    refuse(rt, "eff_refused")
    make_workflow(rt, "case-ambiguous", "sleeping")
    make_effect(rt, "eff_amb", wf_id="case-ambiguous", state="ambiguous")
    make_workflow(rt, "case-reconciled", "completed")
    make_effect(rt, "eff_rec", wf_id="case-reconciled", state="ambiguous")
    sql(
        rt,
        SET_EFFECTS_RECONCILED_BY_EFFECT_ID,
    )
    make_workflow(rt, "case-failed", "failed")
    make_workflow(rt, "case-stuck", "stuck")
    make_workflow(rt, "case-fine", "completed")


def listed(body: str) -> set[str]:
    return set(re.findall(r'data-case="([^"]+)"', body))


def test_the_case_list_filters_by_each_outcome(rt, alice, every_outcome):
    c = client_for(alice)
    every = listed(text(c.get(reverse("approvals:cases"))))
    assert every == {
        "case-waiting",
        "case-refused",
        "case-ambiguous",
        "case-reconciled",
        "case-failed",
        "case-stuck",
        "case-fine",
    }
    expected = {
        "waiting": {"case-waiting"},
        "refused": {"case-refused"},
        "ambiguous": {"case-ambiguous"},
        "failed": {"case-failed"},
        "stuck": {"case-stuck"},
    }
    for outcome, cases in expected.items():
        body = text(c.get(reverse("approvals:cases"), {"outcome": outcome}))
        assert listed(body) == cases, (outcome, listed(body))
        assert f'data-outcome="{outcome}" class="on"' in body
    body = text(c.get(reverse("approvals:cases")))
    for label in ("Waiting for approval (1)", "Refused (1)", "Ambiguous (1)", "Failed (1)", "Stuck (1)"):
        assert label in body, label


def test_an_unknown_outcome_is_named_and_the_whole_list_shown(rt, alice, every_outcome):
    body = text(client_for(alice).get(reverse("approvals:cases"), {"outcome": "lost"}, follow=True))
    assert "outcome: &#x27;lost&#x27; is not one of waiting, refused, ambiguous, failed, stuck" in body
    assert len(listed(body)) == 7


def test_the_case_page_says_refused_not_proposed(rt, alice, every_outcome):
    body = text(client_for(alice).get(reverse("approvals:case", args=["case-refused"])))
    assert "refused by the runtime's checks, never sent" in body
    assert "proposed, not sent yet" not in body


def test_the_admin_filters_workflows_by_outcome(rt, every_outcome):
    ops = user("ops", "ilr.view_workflow", staff=True)
    c = client_for(ops)
    for outcome, case in (
        ("waiting", "case-waiting"),
        ("refused", "case-refused"),
        ("ambiguous", "case-ambiguous"),
        ("stuck", "case-stuck"),
    ):
        body = text(c.get(reverse("admin:ilr_workflow_changelist"), {"outcome": outcome}))
        shown = set(re.findall(r"/admin/ilr/workflow/(case-[a-z]+)/change/", body))
        assert shown == {case}, (outcome, shown)


def test_the_outcome_counts_are_one_query(rt, every_outcome):
    connection.ensure_connection()  # the connection's own setup is not the counts' query
    with CaptureQueriesContext(connection) as queries:
        found = case_lists.counts()
    assert found == {"waiting": 1, "refused": 1, "ambiguous": 1, "failed": 1, "stuck": 1}
    assert len(queries) == 1, [q["sql"] for q in queries]


def _committed_journal(rt, effect_id: str, grant_id: str, result: dict):
    conn = rt.connection()
    with conn.transaction():
        cur = conn.cursor()
        ts = cur.execute("select extract(epoch from now())::float8 as t").fetchone()["t"]
        payload = {"payment": "pay_1", "amount": 2000}
        journal.append(cur, effect_id, "PROPOSED", ts, {"effect": payload, "lease": grant_id})
        journal.append(
            cur,
            effect_id,
            "DISPATCHED",
            ts + 0.01,
            {
                "effect": payload,
                "checks": {
                    "lease": {
                        "grant_id": grant_id,
                        "revoked": None,
                        "expires_at_ts": None,
                        "max_cents": 2000,
                        "payload_hash": proposal_hash(),
                        "action_matches": True,
                    },
                    "lease_live": True,
                    "violations": [],
                },
            },
        )
        journal.append(cur, effect_id, "COMMITTED", ts + 0.2, {"result": result})


def test_receipt_names_its_case_amount_approvers_and_reference(rt, alice):
    make_waiting(rt)
    rt.approve_request(rid(), by="alice")
    grant_id = rt.approval_request(rid())["grant_id"]
    make_effect(rt, "eff_done", state="committed", grant_id=grant_id)
    _committed_journal(rt, "eff_done", grant_id, {"id": "re_77", "amount": 2000})
    c = client_for(alice)
    body = text(c.get(reverse("approvals:receipt", args=["eff_done"])))
    case_url = reverse("approvals:case", args=["case-1"])
    assert f'href="{case_url}" id="receipt-case"' in body
    assert re.search(r'id="receipt-amount">\$20\.00<', body)
    assert re.search(r'id="receipt-approvers">alice \(request <span class="mono">' + re.escape(rid()), body)
    assert re.search(r'id="receipt-reference">re_77 ', body)
    # ... and the case links back to the receipt.
    assert reverse("approvals:receipt", args=["eff_done"]) in text(c.get(case_url))


def test_a_target_declares_its_reference_field_and_currency(rt, alice, registered):
    class Ledger:
        name, tier, amount_field, currency, reference_field = "local-refunds", 1, "amount", "EUR", "provider_ref"

        def apply(self, effect_id, payload):
            raise AssertionError("not sent in this test")

    registered(Ledger())
    make_waiting(rt)
    rt.approve_request(rid(), by="alice")
    grant_id = rt.approval_request(rid())["grant_id"]
    make_effect(rt, "eff_eur", state="committed", grant_id=grant_id)
    _committed_journal(rt, "eff_eur", grant_id, {"id": "internal-1", "provider_ref": "PR-9"})
    body = text(client_for(alice).get(reverse("approvals:receipt", args=["eff_eur"])))
    assert re.search(r'id="receipt-amount">EUR 20\.00<', body)
    assert re.search(r'id="receipt-reference">PR-9 ', body)


def test_a_refused_receipt_says_so_and_names_no_reference(rt, alice, every_outcome):
    body = text(client_for(alice).get(reverse("approvals:receipt", args=["eff_refused"])))
    assert "Refused by the runtime's checks" in body
    assert "none: the target confirmed nothing" in body


TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}[^<\"]{0,20}")


def test_every_page_shows_timestamps_in_one_format(rt, alice, every_outcome):
    rt.approve_request(rid("case-waiting"), by="alice")
    make_effect(rt, "eff_r", wf_id="case-waiting", state="committed")
    _committed_journal(rt, "eff_r", "g-none", {"id": "re_1"})
    c = client_for(alice)
    pages = [
        reverse("approvals:queue"),
        reverse("approvals:cases"),
        reverse("approvals:ambiguous"),
        reverse("approvals:case", args=["case-waiting"]),
        reverse("approvals:case", args=["case-ambiguous"]),
        reverse("approvals:receipt", args=["eff_r"]),
        reverse("approvals:receipt", args=["eff_amb"]),
    ]
    seen = 0
    for url in pages:
        body = re.sub(r'title="[^"]*"', "", text(c.get(url)))  # exact instants live in title attributes
        for stamp in TIMESTAMP.findall(body):
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC.*", stamp), (url, stamp)
            seen += 1
    assert seen >= 10, seen


def test_a_form_error_names_its_field(rt, alice):
    make_waiting(rt)
    before = counts(rt)
    body = text(
        client_for(alice).post(approve_url(), {"payload_hash": proposal_hash(), "expires_in": "abc"}, follow=True)
    )
    assert "Approval expires: Select a valid choice." in body and "Nothing was changed." in body
    body = text(client_for(alice).post(approve_url(), {"expires_in": "3600"}, follow=True))
    assert "Payload hash: This field is required." in body
    assert counts(rt) == before


def test_an_unsigned_receipt_does_not_claim_signatures(rt, alice, settings):
    from ilr._journal import keys

    make_waiting(rt)
    make_effect(rt, "eff_u", state="committed")
    keys.signing_key.cache_clear()
    settings.ILR_DATA_DIR = "/nonexistent-ilr-data"  # no key under it
    settings.ILR_SIGNING_KEY = None
    try:
        _committed_journal(rt, "eff_u", "g1", {"id": "re_1"})
        body = text(client_for(alice).get(reverse("approvals:receipt", args=["eff_u"])))
    finally:
        keys.signing_key.cache_clear()
    assert "no key signs this journal (unsigned)" in body and "Yes, but unsigned" in body
    assert "signature verifies" not in body and "signatures verify" not in body
