"""A receipt's integrity (issue 40, items 7, 8; docs/security.md): key rotation, and the signed
reconcile.

Real PostgreSQL throughout, real worker subprocesses and the real HTTP target where a workflow
runs, and real ``manage.py`` subprocesses for the key commands. The database superuser's edits go
past the append-only trigger with ``session_replication_role = replica``, as the issue's attacker
did.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from ilr import InvalidInput
from ilr._journal import keys, receipts
from tests.support import ROOT
from tests.support.db import superuser
from tests.support.queries.effects import TAMPER_EFFECTS_SENDS_STATE_RECONCILED_BY_EFFECT_ID
from tests.support.refund_harness import approve, refund_env
from tests.support.review import commit_chain, effect_chain


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


# -- item 7: rotation and the key file -----------------------------------------------------------


def test_rotation_keeps_every_receipt_verifiable_and_a_missing_key_is_one_sentence(rt, signing, tmp_path):
    first = keys.key_id(keys.public_key())
    effect_id = effect_chain(rt, commit=False)
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
        TAMPER_EFFECTS_SENDS_STATE_RECONCILED_BY_EFFECT_ID,
        (effect_id,),
    )
    v = receipts.verify(rt.receipt(effect_id))
    assert v["tamper_evident"] is False
    problems = " | ".join(v["problems"])
    assert "sends 0" in problems and "says committed" in problems and "reconciled" in problems, problems
