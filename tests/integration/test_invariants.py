"""Each invariant check is proven able to fail (issue 7): a seeded, healthy database holds every
invariant; then, one at a time, the database (or the evidence) is corrupted the way the
invariant forbids, and the check must report it. Each corruption is rolled back."""

from __future__ import annotations

import json

import pytest

from ilr import _codec as codec
from ilr._invariants import INVARIANTS, check_all, violations
from ilr._journal import journal
from ilr._schedules.spec import tick_workflow_id
from tests.support.queries.claims import SEED_CLAIMS_W1, seed_claims_w1
from tests.support.queries.deployments import SEED_DEPLOYMENTS_REFUND, SEED_DEPLOYMENTS_REFUND_2
from tests.support.queries.effects import (
    SEED_EFFECTS_W1,
    SEED_RESPONSES_W1,
    SEED_RESPONSES_W1_2,
    TAMPER_EFFECTS_SENDS,
    TAMPER_EFFECTS_TIER_SENDS,
    seed_effects_w1,
)
from tests.support.queries.grants import ALL_OF_GRANTS_BY_ID_G, SEED_GRANTS, TAMPER_GRANTS_REVOKED_AT
from tests.support.queries.journal import (
    DISABLE_JOURNAL_APPEND_ONLY,
    TAMPER_DELETE_JOURNAL_BY_KIND,
    TAMPER_JOURNAL_BODY_BY_KIND,
)
from tests.support.queries.schedules import SEED_SCHEDULES_S, SEED_TICKS
from tests.support.queries.signals import SEED_SIGNALS_W1, SEED_SIGNALS_W1_2, SEED_SIGNALS_W1_3, SEED_SIGNALS_W1_4
from tests.support.queries.slots import seed_slot
from tests.support.queries.steps import (
    DISABLE_STEPS_APPEND_ONLY,
    SEED_STEPS_W1,
    SEED_STEPS_W1_2,
    TAMPER_DELETE_STEPS_BY_SEQ,
    seed_effect_step_w1,
    seed_steps_w1,
)
from tests.support.queries.workflows import (
    SEED_WORKFLOWS_REFUND,
    SEED_WORKFLOWS_W1,
    TAMPER_WORKFLOWS_CANCEL_REQUESTED_AT,
    TAMPER_WORKFLOWS_CONCURRENCY_KEY_CONCURRENCY_LIMIT_BY_ID,
    TAMPER_WORKFLOWS_QUEUE_QUEUE_LIMIT_QUEUE_RATES,
    TAMPER_WORKFLOWS_STATUS_AVAILABLE_AT_WAITING,
    TAMPER_WORKFLOWS_STATUS_CANCEL_REQUESTED_AT_UPDATED_AT,
    TAMPER_WORKFLOWS_STATUS_CONTINUED,
    TAMPER_WORKFLOWS_STATUS_ERROR_SEQ_2,
    TAMPER_WORKFLOWS_STATUS_RUNNING,
    TAMPER_WORKFLOWS_VERSION,
)

EID, EID_SPARE = codec.effect_id_for({"request_id": "seed"}), codec.effect_id_for({"request_id": "spare"})
PAYLOAD = {"payment": "p1", "amount": 2000}


def _ts(cur, offset: float) -> float:
    return cur.execute("select extract(epoch from now())::float8 - 3600 + %s as t", (offset,)).fetchone()["t"]


def seed(conn) -> dict:
    """A completed refund: two claims (a takeover after expiry), steps, a consumed approval,
    a sleep, a live grant and a committed effect with its sealed chain and response log."""
    cur = conn.cursor()
    t = lambda off: f"now() - interval '3600 seconds' + interval '{off} seconds'"  # noqa: E731
    cur.execute(SEED_DEPLOYMENTS_REFUND)
    cur.execute(SEED_WORKFLOWS_W1)
    cur.execute(seed_claims_w1(t))
    cur.execute(seed_steps_w1(t))
    cur.execute(SEED_SIGNALS_W1)
    cur.execute(
        SEED_GRANTS,
        (codec.payload_hash(PAYLOAD),),
    )
    cur.execute(
        seed_effects_w1(t),
        (EID, json.dumps(PAYLOAD), codec.payload_hash(PAYLOAD)),
    )
    cur.execute(
        seed_effect_step_w1(t),
        (f"{EID}:{codec.payload_hash(PAYLOAD)}",),
    )
    grant = cur.execute(ALL_OF_GRANTS_BY_ID_G).fetchone()
    snapshot = {
        "grant_id": "G",
        "principal": "refund",
        "action": "refund",
        "action_matches": True,
        "max_cents": 2000,
        "payload_hash": grant["payload_hash"],
        "expires_at": None,
        "expires_at_ts": None,
        "revoked": None,
        "granted_by": "alice",
    }
    by = {"workflow_id": "W1", "epoch": 2}
    journal.append(cur, EID, "PROPOSED", _ts(cur, 13), {"agent": "refund", "lease": "G", "effect": PAYLOAD})
    journal.append(cur, EID, "AUTHORIZED", _ts(cur, 13), {"lease": "G"})
    journal.append(
        cur,
        EID,
        "DISPATCHED",
        _ts(cur, 13),
        {
            "effect": PAYLOAD,
            "lease": "G",
            "premises": {},
            "by": by,
            "send_deadline": _ts(cur, 16),
            "settle_margin": 5,
            "checks": {"lease_live": True, "lease": snapshot, "violations": []},
        },
    )
    journal.append(cur, EID, "COMMITTED", _ts(cur, 14), {"via": "first-send", "result": {"id": "re_1"}, "by": by})
    cur.execute(SEED_RESPONSES_W1, (EID,))
    t_send = _ts(cur, 13.5)
    return {
        "snapshot": snapshot,
        "by": by,
        "evidence": {
            "ledger": [{"effect_id": EID, "key": EID, "amount": 2000, "source": "api"}],
            "access_log": [{"method": "POST", "path": "/refunds", "key": EID, "t_wall": t_send, "body": PAYLOAD}],
            "invocations": [{"workflow_id": "W1", "name": "check", "at": _ts(cur, 14.2)}],
        },
    }


@pytest.fixture
def seeded(clean_db, django_db_blocker):
    from ilr import _db as db

    with django_db_blocker.unblock():
        conn = db.connect(clean_db)
        conn.autocommit = False
        state = seed(conn)
        yield conn, state
        conn.rollback()
        conn.close()


def held(conn, evidence, name):
    return check_all(conn, evidence, names=[name])[name]


def test_the_seeded_database_holds_every_invariant(seeded):
    conn, state = seeded
    results = check_all(conn, state["evidence"])
    assert set(results) == set(INVARIANTS)
    assert violations(results) == {}, violations(results)
    assert all(isinstance(v, list) for v in results.values()), results  # nothing skipped


def _append(conn, kind, offset, fields, eid=EID):
    cur = conn.cursor()
    return journal.append(cur, eid, kind, _ts(cur, offset), fields)


def _spare_effect(conn, tier=1, state="dispatched"):
    conn.execute(
        SEED_EFFECTS_W1,
        (EID_SPARE, tier, json.dumps(PAYLOAD), codec.payload_hash(PAYLOAD), state),
    )


def _dispatched(state, **over):
    fields = {
        "effect": PAYLOAD,
        "lease": "G",
        "premises": {},
        "by": state["by"],
        "checks": {"lease_live": True, "lease": state["snapshot"], "violations": []},
    }
    fields.update(over)
    return fields


CORRUPTIONS = {
    "NoRerunAfterComplete": lambda c, s: s["evidence"]["invocations"].append(
        {"workflow_id": "W1", "name": "check", "at": _ts(c.cursor(), 100)}
    ),
    "StepResultUnique": lambda c, s: c.execute(DISABLE_STEPS_APPEND_ONLY),
    "FencedWrites": lambda c, s: c.execute(SEED_STEPS_W1),
    "LeaseMutex": lambda c, s: c.execute(SEED_CLAIMS_W1),
    "TakeoverOnlyAfterExpiry": lambda c, s: c.execute(SEED_CLAIMS_W1),
    "AtMostOneCommit": lambda c, s: (
        c.execute("drop index ilr.one_commit"),
        _append(c, "COMMITTED", 20, {"via": "x", "by": s["by"]}),
    ),
    "EffectAtMostOnceTier12": lambda c, s: s["evidence"]["ledger"].append(
        {"effect_id": EID, "key": EID, "amount": 2000, "source": "api"}
    ),
    "Tier3NeverResends": lambda c, s: c.execute(TAMPER_EFFECTS_TIER_SENDS),
    "NoOverlappingSends": lambda c, s: s["evidence"]["access_log"].append(
        {"method": "POST", "path": "/refunds", "key": EID, "t_wall": _ts(c.cursor(), 14), "body": PAYLOAD}
    ),
    # A resend authorized off the signed record: the counter moved, no RESENT entry.
    "EverySendJournaled": lambda c, s: c.execute(TAMPER_EFFECTS_SENDS),
    "CommittedImpliesApplied": lambda c, s: s["evidence"]["ledger"].clear(),
    "AmbiguousOnlyWhenUnknowable": lambda c, s: (
        _spare_effect(c, tier=2),
        _append(
            c, "AMBIGUOUS", 20, {"reason": "guess", "rechecked": {"lease_live": True, "violations": []}}, EID_SPARE
        ),
    ),
    "EffectCheckpointAtomic": lambda c, s: (
        c.execute(TAMPER_WORKFLOWS_STATUS_RUNNING),
        c.execute(DISABLE_STEPS_APPEND_ONLY),
        c.execute(TAMPER_DELETE_STEPS_BY_SEQ),
    ),
    "SendRequiresLiveClaim": lambda c, s: (
        _spare_effect(c),
        _append(c, "DISPATCHED", 20, _dispatched(s, by={"workflow_id": "W1", "epoch": 7}), EID_SPARE),
    ),
    "NoSendUnderRevokedGrant": lambda c, s: c.execute(TAMPER_GRANTS_REVOKED_AT),
    "RevokeLinearizable": lambda c, s: c.execute(TAMPER_GRANTS_REVOKED_AT),
    "NoSendOnStalePremise": lambda c, s: (
        _spare_effect(c),
        _append(
            c,
            "DISPATCHED",
            20,
            _dispatched(
                s, checks={"lease_live": True, "lease": s["snapshot"], "violations": ["refunded_by_others changed"]}
            ),
            EID_SPARE,
        ),
    ),
    "RecoveryRechecks": lambda c, s: (
        _spare_effect(c),
        _append(
            c,
            "COMMITTED",
            20,
            {
                "via": "retry-idempotent",
                "by": s["by"],
                "rechecked": {"lease_live": False, "lease": s["snapshot"], "violations": [], "at": _ts(c.cursor(), 19)},
            },
            EID_SPARE,
        ),
    ),
    "PayloadBound": lambda c, s: (
        _spare_effect(c),
        _append(c, "DISPATCHED", 20, _dispatched(s, effect={"payment": "p1", "amount": 5000}), EID_SPARE),
    ),
    "NoSendAfterCancel": lambda c, s: c.execute(TAMPER_WORKFLOWS_CANCEL_REQUESTED_AT),
    "LateResultPreserved": lambda c, s: c.execute(SEED_RESPONSES_W1_2, (EID,)),
    "ReceiptChainLinear": lambda c, s: (
        c.execute(DISABLE_JOURNAL_APPEND_ONLY),
        c.execute(TAMPER_JOURNAL_BODY_BY_KIND),
    ),
    "ReceiptTruthful": lambda c, s: s["evidence"]["ledger"].clear(),
    # The issue 40 truncation: the last entry deleted past the append-only trigger, the head kept.
    "ReceiptComplete": lambda c, s: (
        c.execute(DISABLE_JOURNAL_APPEND_ONLY),
        c.execute(TAMPER_DELETE_JOURNAL_BY_KIND),
    ),
    "TimerNotEarly": lambda c, s: c.execute(SEED_STEPS_W1_2),
    "SignalExactlyOnceConsumed": lambda c, s: c.execute(SEED_SIGNALS_W1_2),
    "NoLostWakeup": lambda c, s: (
        c.execute(TAMPER_WORKFLOWS_STATUS_AVAILABLE_AT_WAITING),
        c.execute(SEED_SIGNALS_W1_3),
    ),
    "NoCancelLeftAsleep": lambda c, s: c.execute(TAMPER_WORKFLOWS_STATUS_CANCEL_REQUESTED_AT_UPDATED_AT),
    "NoSignalLeftBehind": lambda c, s: (
        c.execute(TAMPER_WORKFLOWS_STATUS_CONTINUED),
        c.execute(SEED_SIGNALS_W1_4),
    ),
    "VersionPinned": lambda c, s: (
        c.execute(SEED_DEPLOYMENTS_REFUND_2),
        c.execute(TAMPER_WORKFLOWS_VERSION),
    ),
    "NonDeterminismLoud": lambda c, s: c.execute(TAMPER_WORKFLOWS_STATUS_ERROR_SEQ_2),
    "ForkNeverResends": lambda c, s: _append(c, "DISPATCHED", 20, _dispatched(s)),
    # Concurrency keys: rows written past the slot functions (migration 0016).
    "SlotMutex": lambda c, s: (
        _workflows(c, "W2"),
        _slot(c, "W1", slot_no=0, queued=0, acquired=0, released=10),
        _slot(c, "W2", slot_no=0, queued=5, acquired=5, released=15),
    ),
    "NoRunWithoutSlot": lambda c, s: c.execute(TAMPER_WORKFLOWS_CONCURRENCY_KEY_CONCURRENCY_LIMIT_BY_ID),
    "SlotReleasedAtEnd": lambda c, s: _slot(c, "W1", slot_no=0, queued=0, acquired=0),
    "NoStrandedWaiter": lambda c, s: (_workflows(c, "W2", status="pending"), _slot(c, "W2", queued=0)),
    "RateRespected": lambda c, s: (
        _workflows(c, "W2", "W3"),
        c.execute(TAMPER_WORKFLOWS_QUEUE_QUEUE_LIMIT_QUEUE_RATES),
        _slot(c, "W2", key="queue:q", slot_no=0, queued=0, acquired=0, released=1, not_before=0),
        _slot(c, "W3", key="queue:q", slot_no=0, queued=2, acquired=2, released=3, not_before=10),
    ),
    "SlotFifo": lambda c, s: (
        _workflows(c, "W2", "W3"),
        _slot(c, "W2", slot_no=0, queued=1, acquired=5, released=6),
        _slot(c, "W3", slot_no=0, queued=0, acquired=8, released=9),
    ),
    # Schedules: tick rows and workflows written past the tick transaction (docs/protocol.md §5.8).
    "ScheduleTickOnce": lambda c, s: (
        _schedule(c),
        _workflows(c, "sched:S:2026-01-01T00:00:00Z", status="running"),
    ),
    "ScheduleTickNotEarly": lambda c, s: (
        _schedule(c),
        _tick(c, "now() + interval '1 hour'", "skip"),
    ),
    "ScheduleOverlapRespected": lambda c, s: (
        _schedule(c),
        _tick(c, "now() - interval '20 seconds'", "skip"),
        _tick(c, "now() - interval '10 seconds'", "skip"),
    ),
}


def _schedule(c) -> None:
    c.execute(SEED_SCHEDULES_S)


def _tick(c, at: str, overlap: str) -> None:
    """A started tick of schedule S at ``at`` (SQL) and its running workflow, inserted now."""
    t = c.execute(f"select {at} as t").fetchone()["t"]
    wf_id = tick_workflow_id("S", t)
    _workflows(c, wf_id, status="running")
    c.execute(
        SEED_TICKS,
        (t, overlap, wf_id),
    )


def _workflows(c, *ids: str, status: str = "completed") -> None:
    for wf_id in ids:
        c.execute(
            SEED_WORKFLOWS_REFUND,
            (wf_id, status),
        )


def _slot(c, wf_id: str, *, queued: float, slot_no=None, acquired=None, released=None, key="acct", not_before=None):
    """A row of ilr.slots for ``key`` (limit 1) with times as seconds after the seed's start."""
    t = "now() - interval '3600 seconds' + make_interval(secs => %s)"

    def opt(value):
        return f"case when %s::float8 is null then null else {t} end", (value, value or 0)

    acq, acq_args = opt(acquired)
    rel, rel_args = opt(released)
    nb, nb_args = opt(not_before)
    c.execute(
        seed_slot(t, acq, rel, nb),
        (key, wf_id, slot_no, queued, *acq_args, *rel_args, released, *nb_args),
    )


def test_every_invariant_has_a_corruption():
    assert set(CORRUPTIONS) == set(INVARIANTS)


@pytest.mark.parametrize("name", sorted(INVARIANTS))
def test_check_reports_its_corruption(seeded, name):
    conn, state = seeded
    assert held(conn, state["evidence"], name) == []
    CORRUPTIONS[name](conn, state)
    found = held(conn, state["evidence"], name)
    assert isinstance(found, list) and found, f"{name} did not report its corruption"
