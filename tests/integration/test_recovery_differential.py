"""Recovery differential (issue 7, the decision table of docs/protocol.md §6.5).

1. The pure decision function ``ilr._effects.effects.recovery_decision`` against a table written here
   independently from the table's rows, for every combination of tier, dedup window passed,
   queryable, grant live, premises stale and found.
2. The database path (the real ``recovery.recover`` on a real connection, a real T_dispatch before it,
   the real HTTP target answering the lookup and the resend) driven into each combination,
   producing the same status and the same resolving journal entry.
"""

from __future__ import annotations

import itertools
import json
import time

import pytest

from demo.peers.target import target_process
from demo.peers.targets_client import LocalRefunds, http_json
from ilr import _db as db
from ilr._context.context import WorkflowContext
from ilr._effects.call_state import EffectCallState
from ilr._effects.dispatch import t_dispatch
from ilr._effects.effects import effective_tier, needs_query, recovery_decision
from ilr._effects.recovery import recover
from ilr._journal import journal
from ilr._queries.claims import CLAIM_SQL
from ilr._worker.claims import Run
from tests.support.queries.effects import (
    SENDS_OF_EFFECTS_BY_EFFECT_ID,
    SET_EFFECTS_SEND_DEADLINE_FIRST_DISPATCHED_AT_BY_EFFECT_ID,
    SET_EFFECTS_SEND_DEADLINE_LAST_ERROR_BY_EFFECT_ID,
)
from tests.support.queries.steps import OUTPUT_OF_STEPS_BY_WORKFLOW_ID_SEQ

# The decision table, row by row (docs/protocol.md §6.5, recovery (a) to (d)):
#   (a) tier 1 older than dedup_window - DEDUP_MARGIN is recovered as tier 2 if queryable, else 3
#   (b) tier 3                          -> AMBIGUOUS
#   (d) tier 1, not stale               -> resend: COMMITTED_BY_RETRY
#       stale, not queryable            -> AMBIGUOUS
#       found                           -> COMMITTED_ON_QUERY
#       stale, not found                -> REFUSED:<lease|stale_premise>_at_recovery
#       not stale, not found            -> resend: REAPPLIED_AFTER_QUERY
EFFECTIVE = {  # (tier, window_passed, queryable) -> effective tier
    (1, False, False): 1,
    (1, False, True): 1,
    (1, True, False): 3,
    (1, True, True): 2,
    (2, False, True): 2,
    (2, True, True): 2,
    (3, False, False): 3,
    (3, True, False): 3,
    (3, False, True): 3,
    (3, True, True): 3,
}
ENTRY = {  # status -> (resolving journal kind, via)
    "AMBIGUOUS": ("AMBIGUOUS", None),
    "COMMITTED_BY_RETRY": ("COMMITTED", "retry-idempotent"),
    "COMMITTED_ON_QUERY": ("COMMITTED", "recovery-query"),
    "REAPPLIED_AFTER_QUERY": ("COMMITTED", "recovery-reapply"),
    "REFUSED:lease_at_recovery": ("REFUSED", None),
    "REFUSED:stale_premise_at_recovery": ("REFUSED", None),
}


def expected_status(tier, window_passed, queryable, grant_live, stale_premise, found):
    eff = EFFECTIVE[(tier, window_passed, queryable)]
    stale = (not grant_live) or stale_premise
    if eff == 3:
        return "AMBIGUOUS"
    if eff == 1:
        if not stale:
            return "COMMITTED_BY_RETRY"
        if not queryable:
            return "AMBIGUOUS"
    if found:
        return "COMMITTED_ON_QUERY"
    if stale:
        return "REFUSED:lease_at_recovery" if not grant_live else "REFUSED:stale_premise_at_recovery"
    return "REAPPLIED_AFTER_QUERY"


ACTION_STATUS = {
    "ambiguous": "AMBIGUOUS",
    "resend": "COMMITTED_BY_RETRY",
    "commit_on_query": "COMMITTED_ON_QUERY",
    "reapply": "REAPPLIED_AFTER_QUERY",
}
COMBOS = [
    c
    for c in itertools.product((1, 2, 3), (False, True), (False, True), (False, True), (False, True), (False, True))
    if (c[0], c[1], c[2]) in EFFECTIVE
]


@pytest.mark.parametrize("tier, window, queryable, grant_live, stale_premise, found", COMBOS)
def test_pure_decision_matches_the_spec_table(tier, window, queryable, grant_live, stale_premise, found):
    stale = (not grant_live) or stale_premise
    asked = needs_query(tier, window, queryable, stale)
    action = recovery_decision(
        tier=tier, window_passed=window, queryable=queryable, stale=stale, found=found if asked else None
    )
    assert action != "query"  # whenever the table needs a lookup, needs_query asked for one
    status = ACTION_STATUS.get(action) or (
        "REFUSED:lease_at_recovery" if not grant_live else "REFUSED:stale_premise_at_recovery"
    )
    assert status == expected_status(tier, window, queryable, grant_live, stale_premise, found)
    assert effective_tier(tier, window, queryable) == EFFECTIVE[(tier, window, queryable)]


# -- the database path ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    d = tmp_path_factory.mktemp("targets")
    with (
        target_process(tier=1, queryable=True, ledger=d / "t1.sqlite") as t1,
        target_process(tier=2, ledger=d / "t2.sqlite") as t2,
        target_process(tier=3, ledger=d / "t3.sqlite") as t3,
    ):
        yield {1: t1, 2: t2, 3: t3}


def _dispatched_call(rt, target, tag: str):
    """A claimed "waiter" run and an effect call (EffectCallState) whose T_dispatch committed DISPATCHED and whose
    first send was never made (its answer "lost"). Returns (conn, run, call, payment, payload,
    grant)."""
    payment = f"pay-{tag}"
    http_json("POST", f"{target.base_url}/admin/payments", {"id": payment, "paid": 10_000})
    facts = target.capture(payment)
    rt.start("waiter", f"wf-{tag}", {})
    conn = db.connect()
    row = conn.execute(CLAIM_SQL, {"names": ["waiter"], "versions": ["1"], "n": 1, "owner": "T", "ttl": 60}).fetchone()
    run = Run(row, 60, time.monotonic())
    grant = rt.grant("waiter", "refund", max_cents=5000, by="policy")
    payload = {"payment": payment, "amount": 2000}
    ctx = WorkflowContext(run, conn, {})
    call = EffectCallState.for_call(
        ctx, run, lambda: conn, target, f"key-{tag}", payload, facts, grant, None, (), False
    )
    call.seq = 1
    assert t_dispatch(call, []) is None
    return conn, run, call, payment, payload, grant


DB_COMBOS = [c for c in COMBOS if not (c[0] == 3 and (c[1] or c[2]))]  # tier 3 ignores window and lookup


@pytest.mark.parametrize("tier, window, queryable, grant_live, stale_premise, found", DB_COMBOS)
def test_database_path_matches_the_table(rt, targets, tier, window, queryable, grant_live, stale_premise, found):
    url = targets[tier]
    tag = f"{tier}{int(window)}{int(queryable)}{int(grant_live)}{int(stale_premise)}{int(found)}-{time.time_ns()}"
    target = LocalRefunds(
        url, tier=tier, queryable=queryable if tier == 1 else None, send_timeout=3, settle_margin=1, dedup_window=700.0
    )  # window passes at an age over 100 s
    conn, run, call, payment, payload, grant = _dispatched_call(rt, target, tag)
    # Drive the effect into the combination.
    conn.execute(
        SET_EFFECTS_SEND_DEADLINE_FIRST_DISPATCHED_AT_BY_EFFECT_ID,
        (200 if window else 1, call.effect_id),
    )
    if found:
        target.apply(call.effect_id, payload)  # the first send did land after all
    if stale_premise:
        http_json("POST", f"{url}/admin/hand_refund", {"payment": payment, "amount": 500})
    if not grant_live:
        rt.revoke(grant, by="bob")
    result = recover(call, take_status=True)
    want = expected_status(tier, window, queryable, grant_live, stale_premise, found)
    assert result.status == want
    last = journal.parsed(conn, call.effect_id)[-1]
    kind, via = ENTRY[want]
    assert last["kind"] == kind and last.get("via") == via
    if kind == "REFUSED":
        assert last["resolves"] is True
    step = conn.execute(OUTPUT_OF_STEPS_BY_WORKFLOW_ID_SEQ, (run.workflow_id,)).fetchone()
    assert step["output"]["status"] == want  # recorded with the resolving entry, in one transaction
    conn.close()


# -- resends that converge (docs/protocol.md §6.5): a lookup when one is due, and a spent policy --
#   tier 1 (in its window), not stale:
#     lookup due (a repeated answer, or lookup_after unanswered sends), queryable:
#         found -> COMMITTED_ON_QUERY; not found -> resend: COMMITTED_BY_RETRY
#     lookup due, no lookup                  -> resend: COMMITTED_BY_RETRY (nothing to ask)
#     policy spent, queryable: found -> COMMITTED_ON_QUERY; not found -> REFUSED:resends_exhausted
#     policy spent, no lookup                -> AMBIGUOUS


def expected_converging(queryable: bool, due: str, found: bool) -> str:
    if due == "spent":
        if not queryable:
            return "AMBIGUOUS"
        return "COMMITTED_ON_QUERY" if found else "REFUSED:resends_exhausted"
    if queryable and found:
        return "COMMITTED_ON_QUERY"
    return "COMMITTED_BY_RETRY"


CONVERGING = list(itertools.product((False, True), ("repeated", "unanswered", "spent"), (False, True)))


@pytest.mark.parametrize("queryable, due, found", CONVERGING)
def test_pure_decision_when_a_lookup_is_due_or_the_policy_spent(queryable, due, found):
    exhausted = due == "spent"
    asked = needs_query(1, False, queryable, False, lookup_due=True)
    assert asked == queryable
    action = recovery_decision(
        tier=1,
        window_passed=False,
        queryable=queryable,
        stale=False,
        found=found if asked else None,
        exhausted=exhausted,
    )
    status = {
        "ambiguous": "AMBIGUOUS",
        "resend": "COMMITTED_BY_RETRY",
        "commit_on_query": "COMMITTED_ON_QUERY",
        "refuse": "REFUSED:resends_exhausted",
    }[action]
    assert status == expected_converging(queryable, due, found)


@pytest.mark.parametrize("queryable, due, found", CONVERGING)
def test_database_path_when_a_lookup_is_due_or_the_policy_spent(rt, targets, queryable, due, found):
    from ilr import RetryPolicy

    tag = f"conv-{int(queryable)}{due}{int(found)}-{time.time_ns()}"
    policy = RetryPolicy(max_attempts=1) if due == "spent" else None
    target = LocalRefunds(
        targets[1], tier=1, queryable=queryable, send_timeout=3, settle_margin=1, resend_policy=policy
    )
    conn, _run, call, _payment, payload, _grant = _dispatched_call(rt, target, tag)
    # The failed send as the sender records it (``send._suspend_after_failed_send``), and settled.
    last_error = {
        "type": "TargetHTTPError",
        "message": "HTTP 500",
        "send": 1,
        "in_progress": False,
        "repeated": due == "repeated",
        "unanswered": 3 if due == "unanswered" else 1,
    }
    conn.execute(
        SET_EFFECTS_SEND_DEADLINE_LAST_ERROR_BY_EFFECT_ID,
        (json.dumps(last_error), call.effect_id),
    )
    if found:
        target.apply(call.effect_id, payload)  # the first send did land after all
    result = recover(call, take_status=True)
    want = expected_converging(queryable, due, found)
    assert result.status == want
    entries = journal.parsed(conn, call.effect_id)
    if want == "COMMITTED_BY_RETRY":
        # The resend's signed record came first, with the answer that preceded it.
        assert [e["kind"] for e in entries[-2:]] == ["RESENT", "COMMITTED"], entries
        assert entries[-2]["send"] == 2 and entries[-2]["after"]["message"] == "HTTP 500"
    if want == "COMMITTED_ON_QUERY":
        assert entries[-1]["result"]["key"] == call.effect_id and result.result == entries[-1]["result"]
    if want == "REFUSED:resends_exhausted":
        assert entries[-1]["found"] is False and entries[-1]["reason"].startswith("resend policy spent: 1 send without")
    sends = conn.execute(SENDS_OF_EFFECTS_BY_EFFECT_ID, (call.effect_id,)).fetchone()
    assert sends["sends"] == len([e for e in entries if e["kind"] in ("DISPATCHED", "RESENT")])
    conn.close()
