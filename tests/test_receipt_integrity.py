"""A receipt's integrity (issue 40, items 1, 6, 7, 8; docs/security.md): a truncated journal,
a bundle re-signed or stripped, key rotation, and the signed reconcile.

Real PostgreSQL throughout, real worker subprocesses and the real HTTP target where a workflow
runs, real ``manage.py`` subprocesses for the key commands, and a real Chromium for the receipt
page. The database superuser's edits go past the append-only trigger with
``session_replication_role = replica``, as the issue's attacker did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from ilr import InvalidInput, codec, db, journal, keys, receipts
from tests.support import ROOT
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, browser_or_skip, log_in
from tests.support.refund_harness import approve, refund_env

PASSWORD = "integrity-only-password"


@pytest.fixture
def signing(tmp_path, settings):
    """A deployment key: written by keys.generate under tmp_path/keys, named by ILR_SIGNING_KEY
    in this process (rt.receipt, rt.reconcile, the receipt page) and passed to workers."""
    private, _ = keys.generate(tmp_path / "keys")
    settings.ILR_SIGNING_KEY = str(private)
    keys.signing_key.cache_clear()
    yield private
    keys.signing_key.cache_clear()


def superuser(test_dsn, sql: str, params: tuple = ()) -> None:
    """Run ``sql`` as the database superuser with the triggers off (the append-only one too)."""
    with db.connect(test_dsn) as conn:
        conn.execute("set session_replication_role = replica")
        conn.execute(sql, params)


def manage(*args: str, env: dict) -> subprocess.CompletedProcess:
    """``manage.py`` as a subprocess, on this test's database."""
    from django.conf import settings

    full = {**os.environ, "ILR_DB_NAME": settings.DATABASES["default"]["NAME"], **env}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=full,
    )


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


@pytest.mark.slow
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
        "delete from ilr.journal where seq = (select max(seq) from ilr.journal where effect_id = %s)",
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
        "update ilr.effects set head_hash = %s, head_n = %s where effect_id = %s",
        (last["hash"], n - 1, effect_id),
    )
    rewound = rt.receipt(effect_id)
    v = receipts.verify(rewound)
    assert v["tamper_evident"] is False and v["happened"] == "unknown"
    assert not any(p.startswith("truncated") for p in v["problems"]), v["problems"]
    superuser(test_dsn, "update ilr.effects set state = 'dispatched' where effect_id = %s", (effect_id,))
    rewritten = rt.receipt(effect_id)
    assert receipts.verify(rewritten)["tamper_evident"] is True  # what the database alone can say
    v = receipts.verify(rewritten, previous=before)
    assert v["tamper_evident"] is False
    assert f"shrank: an earlier receipt of this effect held {n} entries, this one holds {n - 1}" in v["problems"]


# -- item 6: which key verify trusts ------------------------------------------------------------


def _chain(rt, effect_id: str = "eff_integrity", commit: bool = True) -> str:
    """An effect and its chain written as the runtime writes them (journal.append under the row
    lock, the row's state and sends in the same transaction)."""
    conn = rt.connection()
    conn.execute(
        "insert into ilr.deployments (name, version, code_sha256) values ('i', '1', 'x') on conflict do nothing"
    )
    conn.execute("insert into ilr.workflows (id, name, version, input) values ('wf-i', 'i', '1', '{}')")
    payload = {"payment": "pay_i", "amount": 2000}
    conn.execute(
        "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) "
        "values (%s, 'wf-i', 'refunds', 1, %s::jsonb, %s)",
        (effect_id, json.dumps(payload), codec.payload_hash(payload)),
    )
    by = {"workflow_id": "wf-i", "epoch": 1}
    with conn.transaction():
        cur = conn.cursor()
        cur.execute("select 1 from ilr.effects where effect_id = %s for update", (effect_id,))
        journal.append(cur, effect_id, "PROPOSED", 1.0, {"effect": payload, "agent": "a", "lease": None})
        journal.append(cur, effect_id, "AUTHORIZED", 1.0, {"lease": None})
        journal.append(cur, effect_id, "DISPATCHED", 1.0, {"effect": payload, "by": by})
        cur.execute("update ilr.effects set state = 'dispatched', sends = 1 where effect_id = %s", (effect_id,))
    if commit:
        commit_chain(rt, effect_id)
    return effect_id


def commit_chain(rt, effect_id: str) -> None:
    conn = rt.connection()
    with conn.transaction():
        cur = conn.cursor()
        cur.execute("update ilr.effects set state = 'committed' where effect_id = %s", (effect_id,))
        journal.append(cur, effect_id, "COMMITTED", 2.0, {"via": "first-send", "result": {"id": "re_1"}})


def _forge(bundle: dict, key) -> dict:
    """The bundle with its payload raised to $100,000, every entry re-sealed and re-signed with
    ``key``, and ``key`` placed in the bundle as its own."""
    bodies, prev = [], None
    for body in bundle["entries"]:
        entry = {k: v for k, v in json.loads(body).items() if k not in ("hash", "sig")}
        if "effect" in entry:
            entry["effect"] = {**entry["effect"], "amount": 10_000_000}
        entry["prev"] = prev
        if "kid" in entry:
            entry["kid"] = keys.key_id(key.public_key())
        sealed = journal.seal(entry, key)
        bodies.append(codec.canonical(sealed))
        prev = sealed["hash"]
    pem = keys.public_key_pem(key.public_key())
    kid = keys.key_id(key.public_key())
    return {**bundle, "entries": bodies, "key_id": kid, "public_key": pem, "keys": {kid: pem}, "head": None}


def test_a_bundle_stripped_of_its_signatures_or_resigned_with_another_key_is_not_tamper_evident(rt, signing, tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    effect_id = _chain(rt)
    bundle = rt.receipt(effect_id)
    ours = keys.public_key()
    assert receipts.verify(bundle)["tamper_evident"] is True  # the deployment's own key, by id
    assert receipts.verify(bundle, public_key=ours)["tamper_evident"] is True  # pinned

    forged = _forge(bundle, Ed25519PrivateKey.generate())
    v = receipts.verify(forged)
    assert v["tamper_evident"] is False, v
    assert v["signature"] == (f"unverified: the bundle names key {forged['key_id']}, which is not a trusted key"), v[
        "signature"
    ]

    stripped = {
        **bundle,
        "entries": [codec.canonical({**json.loads(b), "sig": None}) for b in bundle["entries"]],
        "key_id": None,
        "public_key": None,
        "keys": {},
    }
    v = receipts.verify(stripped)
    assert v["tamper_evident"] is False and v["unsigned"] == len(bundle["entries"]), v
    assert v["signature"].startswith("unverified:"), v["signature"]
    # A verifier with no trusted key at all cannot call any chain tamper-evident.
    v = receipts.verify(bundle, trusted_keys={})
    assert v["tamper_evident"] is False and v["chain_intact"] is True
    assert v["signature"].startswith("unverified:"), v["signature"]


# -- item 7: rotation and the key file -----------------------------------------------------------


@pytest.mark.slow
def test_rotation_keeps_every_receipt_verifiable_and_a_missing_key_is_one_sentence(rt, signing, tmp_path):
    first = keys.key_id(keys.public_key())
    effect_id = _chain(rt, commit=False)
    rotated = manage("ilr_keys", "rotate", env={"ILR_SIGNING_KEY": str(signing)})
    assert rotated.returncode == 0, rotated.stderr
    keys.signing_key.cache_clear()  # this process reads the new key, as a restarted worker would
    second = keys.key_id(keys.public_key())
    assert second != first and first in rotated.stdout and second in rotated.stdout
    commit_chain(rt, effect_id)
    bundle = rt.receipt(effect_id)
    kids = [json.loads(b).get("kid") for b in bundle["entries"]]
    assert kids == [first, first, first, second], kids
    v = receipts.verify(bundle)
    assert v["tamper_evident"] is True and v["signature"].startswith("verified"), v
    assert not any("sign" in p for p in v["problems"]), v["problems"]
    # Pinned: both keys verify it; the new key alone does not vouch for the old entries.
    old_pub = keys.load_public_pem((signing.parent / "public" / f"{first}.pem").read_text())
    assert receipts.verify(bundle, public_key=[old_pub, keys.public_key()])["tamper_evident"] is True
    v = receipts.verify(bundle, public_key=keys.public_key())
    assert v["tamper_evident"] is False and f"key {first}, which is not a trusted key" in v["signature"]

    missing = tmp_path / "nowhere" / "ed25519.pem"
    for args, code in (
        (("ilr_keys", "show"), 1),
        (("receipt", effect_id, "--verify"), 1),
        (("ilr_worker", "--id", "w-nokey", "--import", "tests.support.flows"), 2),  # refused at start
    ):
        out = manage(*args, env={"ILR_SIGNING_KEY": str(missing)})
        assert out.returncode == code, (args, out.stderr)
        assert "Traceback" not in out.stderr, out.stderr
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "ILR_SIGNING_KEY" in lines[0] and str(missing) in lines[0], out.stderr


# -- item 8: the signed reconcile, and the row's unsigned fields --------------------------------


@pytest.mark.slow
@pytest.mark.allow_violations("ReceiptComplete", "EverySendJournaled", "ReceiptTruthful")
def test_a_reconcile_is_a_signed_entry_and_the_rows_fields_are_checked(rt, workers, tmp_path, signing, test_dsn):
    with refund_env(tmp_path, 3) as env:
        a = workers.start(
            "A", lease_ttl=2, env=env.worker_env(ILR_SIGNING_KEY=str(signing), ILR_KILL_AT="effect_after_send")
        )
        case = env.case("rec-1")
        rt.start("refund_signal", case["id"], case)
        approve(rt, case["id"])
        a.wait(30)
        assert a.returncode == -signal.SIGKILL, workers.log("A")
        workers.start("B", lease_ttl=2, env=env.worker_env(ILR_SIGNING_KEY=str(signing)))
        result = rt.result(case["id"], timeout=60)
    assert result["status"] == "AMBIGUOUS"
    effect_id = result["effect_id"]
    rt.reconcile(effect_id, evidence="ledger shows re_1", by="carol", applied=True)
    bundle = rt.receipt(effect_id)
    last = json.loads(bundle["entries"][-1])
    assert last["kind"] == "RECONCILED" and last["sig"] and last["kid"] == keys.key_id(keys.public_key())
    assert (last["who"], last["applied"], last["evidence"]) == ("carol", True, "ledger shows re_1")
    v = receipts.verify(bundle)
    assert v["tamper_evident"] is True and v["problems"] == [], v
    assert (v["state"], v["sends"]) == ("ambiguous", 1)
    assert v["reconciled"]["by"] == "carol" and v["reconciled"]["applied"] is True

    # Evidence is bounded (an attestation is recorded once, so junk would be permanent).
    with pytest.raises(InvalidInput) as err:
        rt.reconcile(effect_id, evidence="x" * 20_000, by="dave", applied=True)
    assert err.value.field == "evidence"

    # The row's unsigned copies, edited: each mismatch is a problem, and not tamper-evident.
    superuser(
        test_dsn,
        "update ilr.effects set sends = 0, state = 'committed', "
        "reconciled = jsonb_set(reconciled, '{applied}', 'false') where effect_id = %s",
        (effect_id,),
    )
    v = receipts.verify(rt.receipt(effect_id))
    assert v["tamper_evident"] is False
    problems = " | ".join(v["problems"])
    assert "sends 0" in problems and "says committed" in problems and "reconciled" in problems, problems
