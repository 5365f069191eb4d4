"""A receipt's integrity (issue 40, item 1; docs/security.md): a truncated journal reads
truncated in verify() and on the receipt page. Real PostgreSQL, a real worker subprocess and the
real HTTP target, and a real Chromium for the receipt page. The database superuser's edits go past
the append-only trigger with ``session_replication_role = replica``, as the issue's attacker did.
"""

from __future__ import annotations

import json

import pytest

from ilr._journal import receipts
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
from tests.support.db import superuser
from tests.support.queries.effects import (
    TAMPER_EFFECTS_HEAD_HASH_HEAD_N_BY_EFFECT_ID,
    TAMPER_EFFECTS_STATE_BY_EFFECT_ID_DISPATCHED,
)
from tests.support.queries.journal import TAMPER_DELETE_JOURNAL_BY_SEQ_EFFECT_ID
from tests.support.refund_harness import approve, refund_env

PASSWORD = "integrity-only-password"


def committed_run(rt, workers, tmp_path, private, case_id: str) -> str:
    """A refund run by a real worker signing with ``private``, committed; its effect id."""
    with refund_env(tmp_path, 1) as env:
        workers.start("A", lease_ttl=5, env=env.worker_env(ILR_SIGNING_KEY=str(private)))
        case = env.case(case_id)
        rt.start("refund_signal", case["id"], case)
        approve(rt, case["id"])
        result = rt.result(case["id"], timeout=60)
    assert result["status"] == "COMMITTED", workers.log("A")
    return result["effect_id"]


# -- item 1: truncation -------------------------------------------------------------------------


@pytest.mark.allow_violations("ReceiptComplete", "ReceiptChainLinear", "ReceiptTruthful", "LateResultPreserved")
def test_a_truncated_journal_reads_truncated_in_verify_and_on_the_receipt_page(
    rt, workers, tmp_path, signing, live_server, monkeypatch, test_dsn
):
    sync_playwright = browser_or_skip()
    from django.contrib.auth.models import User

    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    effect_id = committed_run(rt, workers, tmp_path, signing, "trunc-1")
    before = rt.receipt(effect_id)
    assert receipts.verify(before)["tamper_evident"] is True
    n = len(before["entries"])
    # The superuser deletes the last entry (the COMMITTED) past the append-only trigger.
    superuser(
        test_dsn,
        TAMPER_DELETE_JOURNAL_BY_SEQ_EFFECT_ID,
        (effect_id,),
    )
    after = rt.receipt(effect_id)
    assert len(after["entries"]) == n - 1

    User.objects.create_superuser("ops-integrity", password=PASSWORD)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            log_in(page, live_server.url, "ops-integrity", PASSWORD)
            page.goto(f"{live_server.url}/review/receipts/{effect_id}/")
            flag = page.locator("#tamper-flag").inner_text()
            assert "Intact" not in flag, flag
            assert "Truncated" in flag and f"entry {n - 1}" in flag and f"entry {n}" in flag, flag
            p5 = page.locator("tr[data-answer=P5]").inner_text()
            assert "truncated" in p5.lower(), p5
            p1 = page.locator("tr[data-answer=P1]").inner_text()
            assert "Unknown" in p1 and "No" not in p1.split("\t")[2:3], p1
        finally:
            browser.close()

    v = receipts.verify(after)
    assert v["tamper_evident"] is False and v["happened"] == "unknown", v
    assert f"truncated: the chain ends at entry {n - 1} but the effect's head is entry {n}" in v["problems"]
    # The row still says committed, and the chain holds no COMMITTED: tampered as well.
    assert any("committed" in p and "no COMMITTED" in p for p in v["problems"]), v["problems"]

    # The superuser who also rewinds the head (the database alone cannot tell): the state still
    # says committed; and a receipt handed out before shows that this one shrank.
    last = json.loads(after["entries"][-1])
    superuser(
        test_dsn,
        TAMPER_EFFECTS_HEAD_HASH_HEAD_N_BY_EFFECT_ID,
        (last["hash"], n - 1, effect_id),
    )
    rewound = rt.receipt(effect_id)
    v = receipts.verify(rewound)
    assert v["tamper_evident"] is False and v["happened"] == "unknown"
    assert not any(p.startswith("truncated") for p in v["problems"]), v["problems"]
    superuser(test_dsn, TAMPER_EFFECTS_STATE_BY_EFFECT_ID_DISPATCHED, (effect_id,))
    rewritten = rt.receipt(effect_id)
    assert receipts.verify(rewritten)["tamper_evident"] is True  # what the database alone can say
    v = receipts.verify(rewritten, previous=before)
    assert v["tamper_evident"] is False
    assert f"shrank: an earlier receipt of this effect held {n} entries, this one holds {n - 1}" in v["problems"]
