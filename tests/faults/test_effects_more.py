"""More gated-effect tests (issue 3): S08b, S09, revoke racing T_dispatch, the
dedup-margin finding (docs/protocol.md §14), tamper."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from ilr._journal import keys, receipts
from tests.support import ROOT
from tests.support.queries.effects import COUNT_RESPONSES
from tests.support.queries.grants import LOCK_GRANTS_BY_ID
from tests.support.queries.journal import (
    DISABLE_JOURNAL_APPEND_ONLY,
    ENABLE_JOURNAL_APPEND_ONLY,
    TAMPER_JOURNAL_BODY_BY_SEQ_EFFECT_ID,
)
from tests.support.refund_harness import approve, our_refunds, refund_env, run_case, total, wait_for_approval_request
from tests.support.waits import wait_for


@pytest.mark.parametrize("tier, expected", [(1, "COMMITTED_BY_RETRY"), (2, "COMMITTED_ON_QUERY")])
def test_s08b_response_after_timeout_inside_settle(rt, workers, tmp_path, tier, expected):
    """Target delay send_timeout + 1 s: the sender gives up (watchdog or socket timeout), the
    request is applied before send_deadline + settle_margin, and recovery finds or dedupes it."""
    with refund_env(tmp_path, tier, send_timeout=2.0, settle_margin=3.0) as env:
        env.admin("delay", {"seconds": 3.0})
        a = workers.start("A", lease_ttl=2, env=env.worker_env())
        case = env.case(f"s08b{tier}")
        rt.start("refund_signal", case["id"], case)
        approve(rt, case["id"])
        # Wait until the first POST was applied by the target (after its delay).
        wait_for(lambda: our_refunds(env, case), timeout=30, message="the delayed refund applied")
        env.admin("delay", {"seconds": 0})
        workers.start("B", lease_ttl=2, env=env.worker_env())
        result = rt.result(case["id"], timeout=60)
        assert result["status"] == expected
        assert len(our_refunds(env, case)) == 1 and total(env, case) == 2000
        if a.poll() is not None:
            assert a.returncode == 70, workers.log("A")  # the watchdog's exit


def test_a_slow_answer_ends_the_send_not_the_worker(rt, workers, tmp_path):
    """The target answers after send_timeout: the socket times out a little before the watchdog
    (apply gets the time left), so the send ends as an unknown outcome and the worker lives on
    to run recovery itself (before the fix the socket waited send_timeout, the watchdog fired
    first, and os._exit ended every run of the worker)."""
    with refund_env(tmp_path, 1, send_timeout=2.0, settle_margin=1.0) as env:
        env.admin("delay", {"seconds": 3.0})
        a = workers.start("A", lease_ttl=2, env=env.worker_env())
        case = env.case("slow-answer")
        rt.start("refund_signal", case["id"], case)
        approve(rt, case["id"])
        wait_for(
            lambda: "failed with an unknown outcome" in workers.log("A"),
            timeout=30,
            message="the send gave up by its socket timeout",
        )
        env.admin("delay", {"seconds": 0})
        result = rt.result(case["id"], timeout=60)
        assert a.poll() is None, workers.log("A")  # no watchdog exit: the same worker recovered
        assert "watchdog" not in workers.log("A")
        assert result["status"] == "COMMITTED_BY_RETRY"
        assert len(our_refunds(env, case)) == 1 and total(env, case) == 2000


@pytest.mark.parametrize(
    "variant, kill_at, applied, expected_total",
    [("pre", "effect_after_dispatch", 0, 0), ("post", "effect_after_send", 1, 2000)],
)
def test_s09_tier3_never_resends(rt, workers, tmp_path, variant, kill_at, applied, expected_total):
    with refund_env(tmp_path, 3) as env:
        case, result, _ = run_case(rt, workers, env, f"s09{variant}", kill_at)
        assert result["status"] == "AMBIGUOUS"
        assert len(our_refunds(env, case)) == applied and total(env, case) == expected_total
        posts = [e for e in env.access_log() if e["method"] == "POST" and e["path"] == "/refunds"]
        assert len(posts) == applied  # Tier3NeverResends: at most one request ever
        assert [e["effect_id"] for e in rt.ambiguous()] == [result["effect_id"]]
        v = receipts.verify(rt.receipt(result["effect_id"]))
        assert v["happened"] == "unknown"


def _backend_waiting_on_lock(rt, application_like: str) -> bool:
    return bool(
        rt.connection()
        .execute(
            "select 1 from pg_stat_activity where wait_event_type = 'Lock' and application_name like %s",
            (application_like,),
        )
        .fetchone()
    )


@pytest.mark.parametrize("first", ["dispatch", "revoke"])
def test_revoke_racing_dispatch_is_linearizable(rt, workers, tmp_path, first, test_dsn):
    """A second connection holds the grant row; T_dispatch and revoke queue behind it in a
    chosen order. No send after the revoke returned unless its effect id was in the returned
    list (RevokeLinearizable)."""
    from ilr import _db as db

    with refund_env(tmp_path, 1) as env:
        workers.start("A", lease_ttl=30, env=env.worker_env())
        case = env.case(f"race{first}")
        rt.start("refund_signal", case["id"], case)
        proposal, facts = wait_for_approval_request(rt, case["id"])
        holder = db.connect(test_dsn, application_name="test-holder")
        holder.execute("begin")
        returned: list = []
        revoke_done = threading.Event()
        revoke_returned_at = []

        def do_revoke(grant_id):
            from ilr import Runtime

            other = Runtime(test_dsn)
            returned.extend(other.revoke(grant_id, by="bob"))
            revoke_returned_at.append(time.time())
            other.close()
            revoke_done.set()

        # Approve, then lock the grant before the worker's T_dispatch can take it FOR SHARE.
        grant_id = rt.approve(case["id"], proposal, facts, by="alice")
        holder.execute(LOCK_GRANTS_BY_ID, (grant_id,))
        revoker = threading.Thread(target=do_revoke, args=(grant_id,))
        if first == "revoke":
            revoker.start()
            wait_for(lambda: _backend_waiting_on_lock(rt, "ilr-client"), message="revoke waiting")
            wait_for(lambda: _backend_waiting_on_lock(rt, "ilr-worker-A"), message="T_dispatch waiting")
        else:
            wait_for(lambda: _backend_waiting_on_lock(rt, "ilr-worker-A"), message="T_dispatch waiting")
            revoker.start()
            wait_for(lambda: _backend_waiting_on_lock(rt, "ilr-client"), message="revoke waiting")
        holder.execute("rollback")
        holder.close()
        revoker.join(30)
        result = rt.result(case["id"], timeout=60)
        eff_id = result["effect_id"]
        sends_after = [
            e
            for e in env.access_log()
            if e["method"] == "POST" and e["path"] == "/refunds" and e["t_wall"] >= revoke_returned_at[0]
        ]
        if first == "revoke":
            assert returned == [] and result["status"] == "REFUSED:lease" and total(env, case) == 0
        else:
            assert returned == [eff_id] and result["status"] == "COMMITTED" and total(env, case) == 2000
        for send in sends_after:
            assert send["key"] in returned


def test_finding2_thin_dedup_margin_is_refused_at_worker_start(rt, workers):
    worker = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "ilr_worker", "--id", "w", "--import", "tests.support.flows"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=workers.env({"ILR_TARGET_URL": "http://127.0.0.1:9", "ILR_TARGET_TIER": "1", "ILR_SEND_TIMEOUT": "700"}),
    )
    assert worker.returncode == 2
    assert "DEDUP_MARGIN (600 s)" in worker.stderr and "send_timeout (700 s)" in worker.stderr
    assert "settle_margin (10 s)" in worker.stderr


@pytest.mark.allow_violations("ReceiptChainLinear", "ReceiptTruthful")
def test_receipt_verifies_and_any_flipped_byte_is_evident(rt, workers, tmp_path, test_dsn):
    private, public = keys.generate(tmp_path / "keys")
    pub = keys.load_public_pem(public.read_text())
    with refund_env(tmp_path, 1) as env:
        workers.start("A", lease_ttl=5, env=env.worker_env(ILR_SIGNING_KEY=str(private)))
        case = env.case("tamper")
        rt.start("refund_signal", case["id"], case)
        approve(rt, case["id"])
        result = rt.result(case["id"], timeout=60)
        assert result["status"] == "COMMITTED"
        bundle = rt.receipt(result["effect_id"], public_key=pub)
        v = receipts.verify(bundle, public_key=pub)  # the key the workers signed with, pinned
        ledger = our_refunds(env, case)
        assert v["valid"] and v["tamper_evident"] and v["problems"] == []
        assert v["happened"] is True and len(ledger) == 1
        assert v["happened_once"] is True and v["authorized_when_fired"] is True and v["assumptions_held"] is True
        # Every single-byte flip of a bundle copy is evident.
        for i, body in enumerate(bundle["entries"]):
            for pos in range(len(body)):
                flipped = body[:pos] + chr(ord(body[pos]) ^ 1) + body[pos + 1 :]
                copy = {**bundle, "entries": [*bundle["entries"][:i], flipped, *bundle["entries"][i + 1 :]]}
                assert receipts.verify(copy, public_key=pub)["tamper_evident"] is False, (i, pos)
        # A byte flipped in the stored body (by someone who can disable the trigger) is evident too.
        from ilr import _db as db

        with db.connect(test_dsn) as conn:
            conn.execute(DISABLE_JOURNAL_APPEND_ONLY)
            try:
                conn.execute(
                    TAMPER_JOURNAL_BODY_BY_SEQ_EFFECT_ID,
                    (result["effect_id"],),
                )
            finally:
                conn.execute(ENABLE_JOURNAL_APPEND_ONLY)
        assert (
            receipts.verify(rt.receipt(result["effect_id"], public_key=pub), public_key=pub)["tamper_evident"] is False
        )


def test_a_failing_response_log_does_not_block_the_commit(rt, workers, tmp_path):
    """The response log travels in T_commit's first round trip as its own transaction. When it
    fails (here a trigger refuses every insert into ilr.responses), T_commit runs again alone
    and the effect commits once; the log holds nothing for it."""
    conn = rt.connection()
    conn.execute(
        "create or replace function public.refuse_response() returns trigger language plpgsql as "
        "$$ begin raise exception 'response log refused (test)'; end $$"
    )
    conn.execute(
        "create trigger refuse_response before insert on ilr.responses "
        "for each row execute function public.refuse_response()"
    )
    try:
        with refund_env(tmp_path, 1) as env:
            workers.start("A", lease_ttl=5, env=env.worker_env())
            case = env.case("log-refused")
            rt.start("refund_signal", case["id"], case)
            approve(rt, case["id"])
            result = rt.result(case["id"], timeout=60)
            assert result["status"] == "COMMITTED", workers.log("A")
            assert len(our_refunds(env, case)) == 1 and total(env, case) == 2000
            assert "T_commit alone" in workers.log("A")
            assert conn.execute(COUNT_RESPONSES).fetchone()["n"] == 0
    finally:
        conn.execute("drop trigger if exists refuse_response on ilr.responses")
        conn.execute("drop function if exists public.refuse_response()")


def test_entries_written_before_the_key_are_unsigned_not_tampered(rt, workers, tmp_path, settings):
    """A receipt written by a worker with no signing key, read once a key exists: verify() says
    each entry is not signed (so it cannot be checked, and tamper_evident is False, as with a key
    every entry must be signed), not that a signature fails; the receipt page says "cannot be
    verified", not "tampering detected"."""
    from approvals import receipt_page

    # The data directory's default key (a demo's or a test's) would sign: set it aside while the
    # keyless worker runs, and put it back whatever happens.
    default = keys.default_dir() / "ed25519.pem"
    aside = tmp_path / "default-key.pem"
    if default.exists():
        default.rename(aside)
    try:
        with refund_env(tmp_path, 1) as env:
            workers.start("A", lease_ttl=5, env=env.worker_env())
            case = env.case("unsigned")
            rt.start("refund_signal", case["id"], case)
            approve(rt, case["id"])
            result = rt.result(case["id"], timeout=60)
    finally:
        if aside.exists():
            aside.rename(default)
    private, public = keys.generate(tmp_path / "keys")
    bundle = rt.receipt(result["effect_id"], public_key=keys.load_public_pem(public.read_text()))
    v = receipts.verify(bundle)
    assert v["valid"] and v["tamper_evident"] is False
    assert v["unsigned"] == len(bundle["entries"]) == len(v["problems"])
    assert all("is not signed" in p for p in v["problems"]), v["problems"]
    settings.ILR_SIGNING_KEY = str(private)
    keys.signing_key.cache_clear()  # this process's key is read once
    try:
        page = receipt_page.receipt(result["effect_id"])
    finally:
        keys.signing_key.cache_clear()
    assert page.unverifiable and not page.tampered
    assert [a.verdict for a in page.answers if a.code == "P5"] == ["Cannot tell"]
