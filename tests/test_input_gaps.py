"""Input gaps (issue 40, item 9): what PostgreSQL or the encoder would choke on, or what would
grow without bound, is refused or bounded with an error naming the field, and nothing written.

Lone surrogates (``"\\ud800"``: a str Python holds but UTF-8 cannot encode) in ids, input, ``by``,
``principal`` and payloads; a signal's ``sender`` with NUL or not a string; reconcile evidence
over its bound. Real PostgreSQL.
"""

from __future__ import annotations

import json

import pytest

from ilr import InvalidInput, codec, receipts
from ilr.reconcile import MAX_EVIDENCE_CHARS

LONE = "\ud800"


def _count(rt, table: str) -> int:
    return rt.connection().execute(f"select count(*) as n from ilr.{table}").fetchone()["n"]


def test_codec_refuses_lone_surrogates_naming_the_path():
    for call, field in (
        (lambda: codec.check_plain({"a": ["ok", "x" + LONE]}, "payload"), "payload.a[1]"),
        (lambda: codec.check_plain({"k" + LONE: 1}, "input"), "input"),
        (lambda: codec.dumps({"a": "\udfff"}, "output"), "output.a"),
        (lambda: codec.check_text("id" + LONE, "workflow_id"), "workflow_id"),
        (lambda: codec.check_who(LONE, "principal"), "principal"),
    ):
        with pytest.raises(InvalidInput) as err:
            call()
        assert err.value.field == field and "surrogate" in str(err.value), err.value


def test_lone_surrogates_are_refused_at_every_entry_point_and_nothing_is_written(rt):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "wf" + LONE, {})
    assert err.value.field == "workflow_id"
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "wf-s", {"x": "a" + LONE})
    assert err.value.field == "input.x"
    assert _count(rt, "workflows") == 0

    rt.start("three_steps", "wf-ok", {})
    with pytest.raises(InvalidInput) as err:
        rt.signal("wf-ok", "poke", {"p": LONE})
    assert err.value.field == "payload.p"
    with pytest.raises(InvalidInput) as err:
        rt.signal("wf-ok", "poke" + LONE, None)
    assert err.value.field == "name"
    with pytest.raises(InvalidInput) as err:
        rt.cancel("wf-ok", by="ops" + LONE)
    assert err.value.field == "by"
    assert _count(rt, "signals") == 0
    with pytest.raises(InvalidInput) as err:
        rt.grant("agent" + LONE, "refund", by="ops")
    assert err.value.field == "principal"
    with pytest.raises(InvalidInput) as err:
        rt.grant("agent", "refund", by="ops" + LONE)
    assert err.value.field == "by"
    assert _count(rt, "grants") == 0


@pytest.mark.parametrize("sender", ["ops\x00", 7, True, "", "x" * (codec.MAX_TEXT_LENGTH + 1), "ops" + LONE])
def test_a_signal_sender_is_a_name_or_none(rt, sender):
    rt.start("three_steps", "wf-sender", {})
    with pytest.raises(InvalidInput) as err:
        rt.signal("wf-sender", "poke", None, sender=sender)
    assert err.value.field == "sender", sender
    assert _count(rt, "signals") == 0


def test_reconcile_evidence_over_its_bound_is_refused_not_cut(rt):
    """The bound is MAX_EVIDENCE_CHARS characters of canonical JSON (ilr.reconcile); 2 MB is
    refused naming ``evidence`` before anything is read or written."""
    for evidence in ("x" * (2 * 1024 * 1024), {"ticket": "y" * MAX_EVIDENCE_CHARS}):
        with pytest.raises(InvalidInput) as err:
            rt.reconcile("eff_missing", evidence, by="ops", applied=True)
        assert err.value.field == "evidence" and str(MAX_EVIDENCE_CHARS) in str(err.value)


@pytest.mark.slow
def test_a_huge_target_answer_is_journaled_bounded_with_its_size_and_hash(rt, workers):
    """A 5 MB answer: the COMMITTED entry (and the step, and what the workflow sees, on every
    replay alike) keeps the small fields whole and the big one as its first
    ANSWER_VALUE_HEAD_CHARS characters, its size and sha256; the receipt still verifies."""
    import hashlib

    from ilr.codec import ANSWER_VALUE_HEAD_CHARS, MAX_ANSWER_BYTES

    size = 5 * 1024 * 1024
    workers.start("w1")
    grant = rt.grant("huge_answer", "refund", max_cents=100, by="policy")
    rt.start("huge_answer", "huge-1", {"size": size, "grant": grant})
    out = rt.result("huge-1", timeout=60)
    assert out["status"] == "COMMITTED", out
    entry = (
        rt.connection()
        .execute(
            "select body, length(body) as n from ilr.journal where effect_id = %s and kind = 'COMMITTED'",
            (out["effect_id"],),
        )
        .fetchone()
    )
    assert entry["n"] < MAX_ANSWER_BYTES + 4096, entry["n"]
    answer = json.loads(entry["body"])["result"]
    assert answer["id"].startswith("ref_") and answer["status"] == "ok"
    echo = answer["echo"]["$bounded"]
    full = json.dumps("x" * size, ensure_ascii=False)
    assert echo["bytes"] == len(full.encode()) and echo["sha256"] == hashlib.sha256(full.encode()).hexdigest()
    assert echo["head"] == full[:ANSWER_VALUE_HEAD_CHARS]
    assert out["result"] == answer
    verdict = receipts.verify(rt.receipt(out["effect_id"]))
    assert verdict["chain_intact"] and verdict["happened"] is True, verdict


@pytest.mark.django_db(transaction=True)
def test_an_admin_grant_with_an_absurd_lifetime_is_a_form_error_naming_the_field(rt):
    from django.contrib.auth.models import Permission, User
    from django.urls import reverse

    from tests.support.review import client_for, text

    ops = User.objects.create_user("ops", password="x", is_staff=True)
    ops.user_permissions.add(*Permission.objects.filter(codename__in=("grant", "view_grant")))
    c = client_for(ops)
    for hours, words in (("1e12", "at most 876000 hours"), ("inf", "Enter a number")):
        r = c.post(
            reverse("admin:ilr_grant_add"),
            {"principal": "refund", "action": "refund", "max_cents": "100", "expires_in_hours": hours},
        )
        assert r.status_code == 200, (hours, r.status_code)
        assert 'id="id_expires_in_hours_error"' in text(r) and words in text(r), hours
    r = c.post(reverse("admin:ilr_grant_add"), {"principal": "x" * 300, "action": "refund", "max_cents": "100"})
    assert r.status_code == 200 and "at most 200 characters" in text(r), r.status_code
    assert _count(rt, "grants") == 0


@pytest.mark.slow
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
