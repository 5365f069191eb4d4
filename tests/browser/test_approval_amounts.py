"""What the approver sees is what the rules check (issue 40, items 2, 4 and 5), end to end.

One definition of a payload's amount (``ilr._amounts.payload_amount``: the target's
``amount_field``) feeds the review UI, the two-person rule and a grant's ``max_cents``; keys are
shown exactly, with the ones that only differ by case, whitespace or a look-alike letter
flagged; approvers are identities, so one person under two spellings, or through the UI and the
API, counts once. Real PostgreSQL, real ``ilr_worker`` subprocesses running
``tests.support.flows.asks_approval``, the real payment target, and the review UI in Chromium
where the item is about what is shown. The pure parts are in tests/unit/test_approval_amounts.py.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse

from ilr import ApprovalRefused, InvalidInput
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
from tests.support.queries.approvals import COUNT_APPROVAL_REQUESTS
from tests.support.queries.grants import COUNT_GRANTS, GRANTED_BY_OF_GRANTS_BY_ID
from tests.support.refund_harness import refund_env, wait_for_request
from tests.support.waits import failure_of

PASSWORD = "amounts-only-password"


def _approver(username: str) -> User:
    u = User.objects.create_user(username, password=PASSWORD)
    u.user_permissions.add(Permission.objects.get(content_type__app_label="approvals", codename="approve"))
    return u


def _start(rt, env, wf_id: str, **extra) -> dict:
    case = env.case(wf_id, paid=100_000)
    rt.start(
        "asks_approval", wf_id, {"url": env.target_url, "payment": case["payment"], "key": f"refund:{wf_id}", **extra}
    )
    return case


def _value_target(url: str):
    from demo.peers.targets_client import LocalRefunds

    target = LocalRefunds(url, name="local-refunds")
    target.amount_field = "value"
    return target


@pytest.mark.django_db(transaction=True)
def test_an_unreadable_amount_under_a_money_rule_is_refused_at_request_time(rt, workers, tmp_path):
    """The project's two-person rule covers "refund": a request whose amount_field ("value") is
    missing or is not cents fails the workflow naming the field and the rule; no request row."""
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        for wf_id, value in (("amt-missing", None), ("amt-text", "100000.00"), ("amt-bool", True)):
            payload = {"payment": env.case(wf_id)["payment"], "amount": 10_000_000}
            if value is not None:
                payload["value"] = value
            rt.start(
                "asks_approval",
                wf_id,
                {
                    "url": env.target_url,
                    "payment": payload["payment"],
                    "key": f"refund:{wf_id}",
                    "amount_field": "value",
                    "payload": payload,
                },
            )
            error = failure_of(rt, wf_id)
            assert error["type"] == "InvalidInput" and error["field"] == "payload.value", error
            if value is None:
                assert "two-person rule" in error["rule"] and "ILR_TWO_PERSON_CENTS" in error["rule"], error
        assert rt.connection().execute(COUNT_APPROVAL_REQUESTS).fetchone()["n"] == 0


@pytest.mark.django_db(transaction=True)
def test_the_rule_reads_the_amount_field_the_approver_is_shown(
    rt, workers, tmp_path, live_server, monkeypatch, registered
):
    """amount_field="value", two_person_cents=10000, payload {"value": 10000000}: the card shows
    $100,000.00 and the second-approver badge, and one approver cannot issue the grant."""
    sync_playwright = browser_or_skip()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    _approver("alice")
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env, sync_playwright() as pw:
        registered(_value_target(env.target_url))
        payment = env.case("amt-value")["payment"]
        rt.start(
            "asks_approval",
            "amt-value",
            {
                "url": env.target_url,
                "payment": payment,
                "key": "refund:amt-value",
                "two_person_cents": 10_000,
                "action": "payout",  # the target's own two_person_cents, not the project's "refund" rule
                "amount_field": "value",
                "payload": {"payment": payment, "value": 10_000_000},
            },
        )
        req = wait_for_request(rt, "amt-value")

        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            log_in(page, live_server.url, "alice", PASSWORD)
            card = page.locator('article[data-workflow="amt-value"]')
            card.wait_for()
            assert card.locator('[data-field="value"]').inner_text() == "$100,000.00"
            assert "two different approvers needed" in card.locator(".card-head").inner_text()
            assert "$100,000.00" in card.locator("button.approve").inner_text()
            card.locator("button.approve").click()
            page.locator(".messages .warning").wait_for()
            assert "needs a second, different approver" in page.locator(".messages").inner_text()
        finally:
            browser.close()
        req = rt.approval_request(req["id"])
        assert req["amount_cents"] == 10_000_000 and req["approvals_needed"] == 2, req
        assert rt.connection().execute(COUNT_GRANTS).fetchone()["n"] == 0
        with pytest.raises(ApprovalRefused, match="two-person rule"):
            rt.approve_request(req["id"], by="alice")
        assert rt.approval_request(req["id"])["status"] == "pending"
        rt.cancel("amt-value", by="tests")  # the local target's apply reads "amount": never send this one


# -- item 4: different keys, one label ------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_keys_are_shown_exactly_and_look_alikes_are_flagged(
    rt, workers, tmp_path, live_server, monkeypatch, registered
):
    """{"amount": 100, "Amount": 5000000, "amount ": 7, "value": 150} under amount_field="value":
    four rows keyed as written ("amount " quoted), the three near-identical keys flagged, and the
    button's figure the rule's ($1.50, which makes it a two-person request at 120 cents)."""
    sync_playwright = browser_or_skip()
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    _approver("alice")
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env, sync_playwright() as pw:
        registered(_value_target(env.target_url))
        payment = env.case("amt-keys")["payment"]
        payload = {"payment": payment, "amount": 100, "Amount": 5_000_000, "amount ": 7, "value": 150}
        rt.start(
            "asks_approval",
            "amt-keys",
            {
                "url": env.target_url,
                "payment": payment,
                "key": "refund:amt-keys",
                "two_person_cents": 120,
                "action": "payout",
                "amount_field": "value",
                "payload": payload,
            },
        )
        req = wait_for_request(rt, "amt-keys")

        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(20_000)
            log_in(page, live_server.url, "alice", PASSWORD)
            card = page.locator('article[data-workflow="amt-keys"]')
            card.wait_for()
            # Every key as written (it read "Payment", "Amount", "Amount", "Amount", "Value").
            labels = [t.replace("ambiguous key", "").strip() for t in card.locator("dl.kv dt").all_inner_texts()]
            # (jsonb keeps keys shorter first, then by code point.)
            assert labels[:5] == ["value", "Amount", "amount", '"amount "', "payment"], labels
            for key in ("amount", "Amount", "amount "):
                row = card.locator(f'dt.key[data-key="{key}"]')
                assert "ambiguous" in row.locator(".badge").inner_text(), key
            for key in ("payment", "value"):
                assert card.locator(f'dt.key[data-key="{key}"] .badge').count() == 0, key
            assert card.locator('[data-field="value"]').inner_text() == "$1.50"
            assert card.locator('[data-field="Amount"]').inner_text() == "5000000"  # not money: not the field
            assert "two different approvers needed" in card.locator(".card-head").inner_text()
            assert "Approve $1.50" in card.locator("button.approve").inner_text()
        finally:
            browser.close()
        assert req["amount_cents"] == 150 and req["approvals_needed"] == 2, req
        rt.cancel("amt-keys", by="tests")


@pytest.mark.django_db(transaction=True)
def test_one_person_under_two_spellings_or_through_ui_and_api_counts_once(rt, workers, tmp_path):
    workers.start("w1")
    with refund_env(tmp_path, tier=1) as env:
        # $600.00: at or above the project's two-person rule for "refund" ($500.00).
        _start(rt, env, "who-api", amount=60_000)
        _start(rt, env, "who-ui", amount=60_000)
        api = wait_for_request(rt, "who-api")
        ui = wait_for_request(rt, "who-ui")
        assert api["approvals_needed"] == ui["approvals_needed"] == 2

        # The API: "alice", then the same person spelled otherwise.
        rt.approve_request(api["id"], by="alice")
        for same in ("alice ", " Alice ", "ALICE", "ａｌｉｃｅ", "alice\u00a0"):
            with pytest.raises(ApprovalRefused, match="two-person rule"):
                rt.approve_request(api["id"], by=same)
        for bad in ("ali\u200bce", "\u202ealice", "alice\n", "   "):
            with pytest.raises(InvalidInput) as err:
                rt.approve_request(api["id"], by=bad)
            assert err.value.field == "by", bad
        assert [a["by"] for a in rt.approval_request(api["id"])["approvals"]] == ["alice"]
        assert rt.connection().execute(COUNT_GRANTS).fetchone()["n"] == 0

        # The UI's user "Alice" (her Django username), then the API as " alice ": one person.
        browser_user = _approver("Alice")
        client = Client()
        client.force_login(browser_user)
        r = client.post(
            reverse("approvals:approve", args=[ui["id"]]), {"payload_hash": ui["payload_hash"]}, follow=True
        )
        assert "needs a second, different approver" in r.content.decode()
        with pytest.raises(ApprovalRefused, match="two-person rule"):
            rt.approve_request(ui["id"], by=" alice ")
        page = client.get(reverse("approvals:queue")).content.decode()
        assert "You approved: waiting for a second person" in page
        # And the API's "alice" on the first request is the UI's Alice too.
        r = client.post(
            reverse("approvals:approve", args=[api["id"]]), {"payload_hash": api["payload_hash"]}, follow=True
        )
        assert "two-person rule" in r.content.decode() and "Nothing was changed" in r.content.decode()
        assert rt.connection().execute(COUNT_GRANTS).fetchone()["n"] == 0

        # A second, different person issues the grant, naming both identities.
        done = rt.approve_request(ui["id"], by="Bob")
        assert done["status"] == "approved" and [a["by"] for a in done["approvals"]] == ["alice", "bob"]
        grant = rt.connection().execute(GRANTED_BY_OF_GRANTS_BY_ID, (done["grant_id"],)).fetchone()
        assert grant["granted_by"] == "alice and bob"
        assert rt.result("who-ui", timeout=30)["status"] == "COMMITTED"
        rt.cancel("who-api", by="tests")
