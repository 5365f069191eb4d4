"""verify()'s P2 and P4 rules (docs/protocol.md §9), pinned two ways.

Pure tests build journal chains the way ilr/_effects/effects.py writes them (the same kinds, `via` values
and fields), sealed with ilr._journal.journal.seal and signed with a real Ed25519 key from ilr.keys, and
check verify()'s answer exactly. Runtime tests drive the real worker against the real target
(tests/support/refund_harness.py) and read the receipt the runtime produced.

The two rules fixed here:

- P4 (assumptions_held) counts only the premise checks that accompanied a send: each
  DISPATCHED's ``checks`` and the ``rechecked`` of a COMMITTED whose via is a resend
  (RESEND_VIAS). A recovery re-check that found violations or a dead grant and REFUSED (or
  resolved without sending) is the check working, not an assumption failing.
- P2 (happened_once) is "unknown" when a reapply (via "recovery-reapply": tier 2, or tier 1 past
  its dedup window, after the lookup found nothing) follows a send whose answer the journal does
  not hold: had that send been applied late (A2 broken, Prove S08c), the target applied twice.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from ilr import _codec as codec
from ilr._journal import history, journal, keys, receipts

# -- pure tests over sealed entries ------------------------------------------------------------

KEY = "refund:case-1"
EID = codec.effect_id_for({"request_id": KEY})
PAYLOAD = {"payment": "pay_case-1", "amount": 2000, "effect_id": EID}
T0 = 1_760_000_000.0
SEND_TIMEOUT, SETTLE = 2.0, 2.0
BY_FIRST = {"workflow_id": "case-1", "epoch": 1}
BY_RECOVERY = {"workflow_id": "case-1", "epoch": 2}
VIOLATION = "prior refunds changed: 0 -> 2000"


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    """A real Ed25519 key file, written by keys.generate."""
    private, _ = keys.generate(tmp_path_factory.mktemp("keys"))
    return private


@pytest.fixture
def signing_key(key_file):
    """The key, loaded the way workers load it, and this deployment's trusted key for the test
    (ILR_SIGNING_KEY): verify() trusts a key only from the deployment or pinned."""
    with override_settings(ILR_SIGNING_KEY=str(key_file)):
        keys.signing_key.cache_clear()
        key = keys.signing_key()
        assert key is not None
        yield key
    keys.signing_key.cache_clear()


def lease(live: bool = True) -> dict:
    """A lease snapshot as effects._lease_snapshot writes it."""
    return {
        "grant_id": "grt_1",
        "principal": "refund-agent",
        "action": "refund",
        "action_matches": True,
        "max_cents": 2000,
        "payload_hash": codec.payload_hash(PAYLOAD),
        "expires_at": None,
        "expires_at_ts": None,
        "revoked": None if live else "2025-10-09T08:00:05+00:00",
        "granted_by": "alice",
    }


def rechecked(*violations: str, live: bool = True) -> dict:
    """A recovery re-check as recovery.t_resolve writes it."""
    return {"lease_live": live, "lease": lease(live), "violations": list(violations), "at": T0 + 5}


def proposed() -> tuple[str, dict]:
    return "PROPOSED", {
        "agent": "refund",
        "lease": "grt_1",
        "premises": {"refunded": 0},
        "effect": PAYLOAD,
        "decision": None,
    }


def authorized() -> tuple[str, dict]:
    return "AUTHORIZED", {"lease": "grt_1"}


def dispatched(*violations: str) -> tuple[str, dict]:
    return "DISPATCHED", {
        "effect": PAYLOAD,
        "lease": "grt_1",
        "premises": {"refunded": 0},
        "checks": {"lease_live": True, "lease": lease(), "violations": list(violations)},
        "by": BY_FIRST,
        "send_deadline": T0 + SEND_TIMEOUT,
        "settle_margin": SETTLE,
    }


def committed(via: str, **fields) -> tuple[str, dict]:
    by = BY_FIRST if via in ("first-send", "late-commit") else BY_RECOVERY
    result = {"id": "re_1", "amount": 2000, "status": "succeeded"}
    return "COMMITTED", {"via": via, "by": by, **({"result": result} if via != "recovery-query" else {}), **fields}


def refused_at_recovery(kind: str, check: dict) -> tuple[str, dict]:
    return "REFUSED", {"reason": f"{kind} at recovery", "resolves": True, "rechecked": check, "by": BY_RECOVERY}


def late_result(received_in_s: float) -> tuple[str, dict]:
    return "LATE_RESULT", {
        "result": {"id": "re_1", "status": "succeeded"},
        "by": BY_FIRST,
        "settle_deadline": T0 + SEND_TIMEOUT + SETTLE,
        "received_in_s": received_in_s,
        "send_timeout": SEND_TIMEOUT,
        "settle_margin": SETTLE,
    }


HEAD = (proposed(), authorized(), dispatched())


def bundle_of(key, *steps: tuple[str, dict]) -> dict:
    """A receipt bundle of sealed, chained, signed entries, shaped like receipts.bundle()."""
    bodies, prev, entries = [], None, []
    for i, (kind, fields) in enumerate(steps):
        entry = journal.seal({"kind": kind, "effect_id": EID, "ts": T0 + i, "prev": prev, **fields}, key)
        bodies.append(codec.canonical(entry))
        entries.append(entry)
        prev = entry["hash"]
    return {
        "effect_id": EID,
        "entries": bodies,
        "head": {"hash": prev, "n": len(bodies)},
        "late_result": None,
        "reconciled": None,
        # The row's copies as the runtime keeps them in step with the entries.
        "sends": len(history.send_entries(entries)),
        "state": history.chain_state(entries),
        "key_id": keys.key_id(key.public_key()),
        "public_key": keys.public_key_pem(key.public_key()),
    }


def check(key, *steps) -> dict:
    v = receipts.verify(bundle_of(key, *steps))
    assert v["valid"] and v["tamper_evident"], v["problems"]
    return v


# P4: only checks that accompanied a send count.


@pytest.mark.parametrize(
    "kind, check_",
    [
        ("stale_premise", rechecked(VIOLATION)),  # Prove S02 / S06: a hand refund during the outage
        ("lease", rechecked(live=False)),  # S03: the grant was revoked during the outage
        ("lease", rechecked(VIOLATION, live=False)),  # both: a dead grant and a changed premise
    ],
)
def test_p4_a_refused_recovery_recheck_is_the_check_working(signing_key, kind, check_):
    v = check(signing_key, *HEAD, refused_at_recovery(kind, check_))
    assert v["happened"] is False and v["sends"] == 1
    assert v["assumptions_held"] is True, v["problems"]
    assert v["authorized_when_fired"] is True  # the one send (DISPATCHED) carried a live lease
    assert not [p for p in v["problems"] if "premise violations" in p]


@pytest.mark.parametrize(
    "resolution",
    [
        (
            "AMBIGUOUS",
            {"reason": "stale_premise at recovery, no lookup", "rechecked": rechecked(VIOLATION), "by": BY_RECOVERY},
        ),  # tier 1, failed re-check, no lookup: nothing resent
        committed("recovery-query", rechecked=rechecked(VIOLATION), found=True),  # found: nothing resent
    ],
)
def test_p4_a_recheck_that_sent_nothing_does_not_count(signing_key, resolution):
    v = check(signing_key, *HEAD, resolution)
    assert v["sends"] == 1
    assert v["assumptions_held"] is True, v["problems"]


@pytest.mark.parametrize(
    "steps",
    [
        (proposed(), authorized(), dispatched(VIOLATION), committed("first-send")),
        (*HEAD, committed("retry-idempotent", rechecked=rechecked(VIOLATION))),
        (*HEAD, committed("recovery-reapply", rechecked=rechecked(VIOLATION))),
    ],
    ids=["dispatched", "retry-idempotent", "recovery-reapply"],
)
def test_p4_a_violation_at_a_send_is_an_assumption_failure(signing_key, steps):
    v = check(signing_key, *steps)
    assert v["assumptions_held"] is False
    assert [p for p in v["problems"] if "premise violations" in p and VIOLATION in p]


@pytest.mark.parametrize("received_in_s, held", [(SEND_TIMEOUT + SETTLE + 3, False), (SEND_TIMEOUT + 1, True)])
def test_p4_the_a2_rule_on_late_results_stays(signing_key, received_in_s, held):
    v = check(
        signing_key, *HEAD, committed("recovery-query", rechecked=rechecked(), found=True), late_result(received_in_s)
    )
    assert v["assumptions_held"] is held
    assert any("A2 did not hold" in p for p in v["problems"]) is (not held)


# P2: a reapply after an unanswered send cannot claim once.


def test_p2_a_reapply_after_an_unanswered_send_is_unknown(signing_key):
    """Prove S08c at tier 2: the first send's answer never came (the watchdog ended the sender,
    no LATE_RESULT), the lookup found nothing, recovery reapplied; the first request may land
    late (A2 broken), so the journal cannot show one application."""
    v = check(signing_key, *HEAD, committed("recovery-reapply", rechecked=rechecked()))
    assert v["happened"] is True and v["sends"] == 2
    assert v["happened_once"] == "unknown"
    sentence = [p for p in v["problems"] if "recovery-reapply" in p]
    assert len(sentence) == 1 and "A2" in sentence[0] and "twice" in sentence[0]
    assert v["assumptions_held"] is True and v["authorized_when_fired"] is True


@pytest.mark.parametrize("late_first", [False, True], ids=["late-after-reapply", "late-before-reapply"])
def test_p2_a_late_result_with_a_reapply_is_two_applications(signing_key, late_first):
    late, reapply = late_result(SEND_TIMEOUT + SETTLE + 3), committed("recovery-reapply", rechecked=rechecked())
    v = check(signing_key, *HEAD, *((late, reapply) if late_first else (reapply, late)))
    assert v["happened"] is True and v["happened_once"] is False
    assert any("applied twice" in p for p in v["problems"])
    assert not any("could have been applied late" in p for p in v["problems"])


@pytest.mark.parametrize(
    "steps",
    [
        (*HEAD, committed("first-send")),
        (*HEAD, committed("late-commit")),
        (*HEAD, committed("retry-idempotent", rechecked=rechecked())),  # tier 1: the key dedupes
        (*HEAD, committed("retry-idempotent", rechecked=rechecked()), late_result(SEND_TIMEOUT + 1)),
        (*HEAD, committed("recovery-query", rechecked=rechecked(), found=True)),
        (*HEAD, committed("recovery-query", rechecked=rechecked(), found=True), late_result(SEND_TIMEOUT + 1)),
    ],
    ids=[
        "first-send",
        "late-commit",
        "retry-idempotent",
        "retry-idempotent+late",
        "recovery-query",
        "recovery-query+late",
    ],
)
def test_p2_one_application_stays_true(signing_key, steps):
    v = check(signing_key, *steps)
    assert v["happened"] is True and v["happened_once"] is True, v["problems"]


def test_p2_nothing_happened_is_not_unknown(signing_key):
    v = check(signing_key, *HEAD, refused_at_recovery("stale_premise", rechecked(VIOLATION)))
    assert v["happened"] is False and v["happened_once"] is False


# The auditor (prove/harness/audit.py) scores these answers against the oracle's ground truth.


def test_audit_scores_the_s08c_unknown_as_no_false_claim(signing_key):
    from prove.harness import audit

    answers = audit.audit_runtime(bundle_of(signing_key, *HEAD, committed("recovery-reapply", rechecked=rechecked())))
    assert answers["P2"] == "unknown" and answers["P5"] is True
    # Ground truth of S08c at tier 2: applied twice; premises unchanged.
    scored = audit.score(answers, {"P1": True, "P2": False, "P3": True, "P4": True, "P5": True})
    assert scored["per"]["P2"] == 0 and scored["false_claims"] == 0 and scored["score"] == 4


def test_audit_p4_is_verifys_answer_and_a_refused_recheck_scores(signing_key):
    from prove.harness import audit

    answers = audit.audit_runtime(
        bundle_of(signing_key, *HEAD, refused_at_recovery("stale_premise", rechecked(VIOLATION)))
    )
    assert answers["P4"] is True and answers["verify"]["assumptions_held"] is True
    # Ground truth of S02: nothing applied, no send on the changed premise.
    scored = audit.score(answers, {"P1": False, "P2": False, "P3": True, "P4": True, "P5": True})
    assert scored == {"score": 5, "false_claims": 0, "per": {q: 1 for q in audit.QUESTIONS}}


# sends: every request on the wire is on the signed record (docs/protocol.md §6.5, §9).


def resent(n: int, check_: dict | None = None, via: str = "retry-idempotent") -> tuple[str, dict]:
    return "RESENT", {
        "via": via,
        "send": n,
        "rechecked": check_ or rechecked(),
        "by": BY_RECOVERY,
        "send_deadline": T0 + 10 * n,
        "after": {"type": "SendInProgress", "message": "HTTP 409", "in_progress": True},
    }


def test_sends_count_every_resent_entry_and_not_the_commit_after_them(signing_key):
    v = check(signing_key, *HEAD, resent(2), resent(3), resent(4), committed("retry-idempotent", rechecked=rechecked()))
    assert v["sends"] == 4 and v["happened"] is True and v["happened_once"] is True, v
    assert v["authorized_when_fired"] is True and v["assumptions_held"] is True, v


def test_a_chain_written_before_resent_still_counts_its_resend(signing_key):
    v = check(signing_key, *HEAD, committed("retry-idempotent", rechecked=rechecked()))
    assert v["sends"] == 2, v


def test_p3_and_p4_judge_every_resend_not_only_the_one_answered(signing_key):
    # The second resend went out under a revoked grant with a changed premise; the third, which
    # the target answered, under a live one. Before RESENT only the answered one was judged.
    bad = rechecked(VIOLATION, live=False)
    v = check(signing_key, *HEAD, resent(2, bad), resent(3), committed("retry-idempotent", rechecked=rechecked()))
    assert v["authorized_when_fired"] is False and v["assumptions_held"] is False, v


def test_an_open_resend_leaves_happened_unknown(signing_key):
    v = check(signing_key, *HEAD, resent(2))
    assert v["sends"] == 2 and v["happened"] == "unknown", v
