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

EID, EID_SPARE = codec.effect_id_for({"request_id": "seed"}), codec.effect_id_for({"request_id": "spare"})
PAYLOAD = {"payment": "p1", "amount": 2000}


def _ts(cur, offset: float) -> float:
    return cur.execute("select extract(epoch from now())::float8 - 3600 + %s as t", (offset,)).fetchone()["t"]


def seed(conn) -> dict:
    """A completed refund: two claims (a takeover after expiry), steps, a consumed approval,
    a sleep, a live grant and a committed effect with its sealed chain and response log."""
    cur = conn.cursor()
    t = lambda off: f"now() - interval '3600 seconds' + interval '{off} seconds'"  # noqa: E731
    cur.execute("insert into ilr.deployments (name, version, code_sha256) values ('refund', '1', 'x')")
    cur.execute(
        "insert into ilr.workflows (id, name, version, input, status, epoch) "
        "values ('W1', 'refund', '1', '{}', 'completed', 2)"
    )
    cur.execute(
        f"insert into ilr.claims values ('W1', 1, 'A', '1', {t(0)}, {t(5)}, 'pending', null), "
        f"('W1', 2, 'B', '1', {t(10)}, {t(15)}, 'running', {t(5)})"
    )
    cur.execute(
        f"insert into ilr.steps (workflow_id, seq, name, kind, output, epoch, created_at) values "
        f"('W1', 1, 'approve', 'signal', '{{\"ok\": 1}}', 2, {t(11)}), "
        f"('W1', 2, 'sleep', 'sleep', jsonb_build_object('until', to_jsonb({t(11.5)})), 2, {t(12)}), "
        f"('W1', 5, 'check', 'step', '1', 2, {t(14.5)})"
    )
    cur.execute(
        "insert into ilr.signals (workflow_id, name, payload, consumed_seq) values ('W1', 'approve', '{\"ok\": 1}', 1)"
    )
    cur.execute(
        "insert into ilr.grants (id, principal, action, max_cents, payload_hash, granted_by) "
        "values ('G', 'refund', 'refund', 2000, %s, 'alice')",
        (codec.payload_hash(PAYLOAD),),
    )
    cur.execute(
        f"insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, "
        f"grant_id, "
        f"dispatch_workflow_id, dispatch_epoch, first_dispatched_at, send_deadline, settle_margin, sends) "
        f"values (%s, 'W1', 'local-refunds', 1, %s::jsonb, %s, 'committed', 'G', 'W1', 2, {t(13)}, {t(16)}, "
        f"interval '5 seconds', 1)",
        (EID, json.dumps(PAYLOAD), codec.payload_hash(PAYLOAD)),
    )
    cur.execute(
        f"insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, epoch, created_at) values "
        f"('W1', 3, 'effect:local-refunds', 'effect', %s, '{{\"status\": \"COMMITTED\"}}', 2, {t(14)})",
        (f"{EID}:{codec.payload_hash(PAYLOAD)}",),
    )
    grant = cur.execute("select * from ilr.grants where id = 'G'").fetchone()
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
    cur.execute("insert into ilr.responses (effect_id, workflow_id, epoch, result) values (%s, 'W1', 2, '{}')", (EID,))
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
        "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, "
        "grant_id, "
        "dispatch_workflow_id, dispatch_epoch) values (%s, 'W1', 't', %s, %s::jsonb, %s, %s, 'G', 'W1', 2)",
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
    "StepResultUnique": lambda c, s: c.execute("alter table ilr.steps disable trigger steps_append_only"),
    "FencedWrites": lambda c, s: c.execute(
        "insert into ilr.steps (workflow_id, seq, name, kind, epoch, created_at) "
        "values ('W1', 9, 'late', 'step', 1, now() - interval '3580 seconds')"
    ),
    "LeaseMutex": lambda c, s: c.execute(
        "insert into ilr.claims values ('W1', 3, 'C', '1', now() - interval '3589 seconds', now(), 'running', "
        "now() - interval '3585 seconds')"
    ),
    "TakeoverOnlyAfterExpiry": lambda c, s: c.execute(
        "insert into ilr.claims values ('W1', 3, 'C', '1', now() - interval '3589 seconds', now(), 'running', "
        "now() - interval '3585 seconds')"
    ),
    "AtMostOneCommit": lambda c, s: (
        c.execute("drop index ilr.one_commit"),
        _append(c, "COMMITTED", 20, {"via": "x", "by": s["by"]}),
    ),
    "EffectAtMostOnceTier12": lambda c, s: s["evidence"]["ledger"].append(
        {"effect_id": EID, "key": EID, "amount": 2000, "source": "api"}
    ),
    "Tier3NeverResends": lambda c, s: c.execute("update ilr.effects set tier = 3, sends = 2"),
    "NoOverlappingSends": lambda c, s: s["evidence"]["access_log"].append(
        {"method": "POST", "path": "/refunds", "key": EID, "t_wall": _ts(c.cursor(), 14), "body": PAYLOAD}
    ),
    # A resend authorized off the signed record: the counter moved, no RESENT entry.
    "EverySendJournaled": lambda c, s: c.execute("update ilr.effects set sends = sends + 1"),
    "CommittedImpliesApplied": lambda c, s: s["evidence"]["ledger"].clear(),
    "AmbiguousOnlyWhenUnknowable": lambda c, s: (
        _spare_effect(c, tier=2),
        _append(
            c, "AMBIGUOUS", 20, {"reason": "guess", "rechecked": {"lease_live": True, "violations": []}}, EID_SPARE
        ),
    ),
    "EffectCheckpointAtomic": lambda c, s: (
        c.execute("update ilr.workflows set status = 'running'"),
        c.execute("alter table ilr.steps disable trigger steps_append_only"),
        c.execute("delete from ilr.steps where seq = 3"),
    ),
    "SendRequiresLiveClaim": lambda c, s: (
        _spare_effect(c),
        _append(c, "DISPATCHED", 20, _dispatched(s, by={"workflow_id": "W1", "epoch": 7}), EID_SPARE),
    ),
    "NoSendUnderRevokedGrant": lambda c, s: c.execute(
        "update ilr.grants set revoked_at = now() - interval '3599 seconds'"
    ),
    "RevokeLinearizable": lambda c, s: c.execute("update ilr.grants set revoked_at = now() - interval '3599 seconds'"),
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
    "NoSendAfterCancel": lambda c, s: c.execute(
        "update ilr.workflows set cancel_requested_at = now() - interval '3599 seconds'"
    ),
    "LateResultPreserved": lambda c, s: c.execute(
        "insert into ilr.responses (effect_id, workflow_id, epoch, result) values (%s, 'W1', 1, '{}')", (EID,)
    ),
    "ReceiptChainLinear": lambda c, s: (
        c.execute("alter table ilr.journal disable trigger journal_append_only"),
        c.execute("update ilr.journal set body = replace(body, 're_1', 're_2') where kind = 'COMMITTED'"),
    ),
    "ReceiptTruthful": lambda c, s: s["evidence"]["ledger"].clear(),
    # The issue 40 truncation: the last entry deleted past the append-only trigger, the head kept.
    "ReceiptComplete": lambda c, s: (
        c.execute("alter table ilr.journal disable trigger journal_append_only"),
        c.execute("delete from ilr.journal where kind = 'COMMITTED'"),
    ),
    "TimerNotEarly": lambda c, s: c.execute(
        "insert into ilr.steps (workflow_id, seq, name, kind, output, epoch, created_at) values ('W1', 4, 'sleep', "
        "'sleep', jsonb_build_object('until', to_jsonb(now())), 2, now() - interval '3587 seconds')"
    ),
    "SignalExactlyOnceConsumed": lambda c, s: c.execute(
        "insert into ilr.signals (workflow_id, name, payload, consumed_seq) values ('W1', 'approve', '{\"ok\": 2}', 2)"
    ),
    "NoLostWakeup": lambda c, s: (
        c.execute(
            "update ilr.workflows set status = 'sleeping', available_at = 'infinity', "
            'waiting = \'{"seq": 4, "kind": "signal", "signal": "approve"}\''
        ),
        c.execute("insert into ilr.signals (workflow_id, name, payload) values ('W1', 'approve', '{}')"),
    ),
    "NoCancelLeftAsleep": lambda c, s: c.execute(
        "update ilr.workflows set status = 'sleeping', cancel_requested_at = now() - interval '1 minute', "
        "updated_at = now(), available_at = now() + interval '1 hour', "
        'waiting = \'{"seq": 4, "kind": "sleep", "name": "sleep"}\''
    ),
    "NoSignalLeftBehind": lambda c, s: (
        c.execute("update ilr.workflows set status = 'continued'"),
        c.execute("insert into ilr.signals (workflow_id, name, payload) values ('W1', 'credit', '{}')"),
    ),
    "VersionPinned": lambda c, s: (
        c.execute("insert into ilr.deployments (name, version, code_sha256) values ('refund', '2', 'y')"),
        c.execute("update ilr.workflows set version = '2'"),
    ),
    "NonDeterminismLoud": lambda c, s: c.execute(
        'update ilr.workflows set status = \'stuck\', error = \'{"type": "NonDeterminism", "seq": 2}\''
    ),
    "ForkNeverResends": lambda c, s: _append(c, "DISPATCHED", 20, _dispatched(s)),
    # Concurrency keys: rows written past the slot functions (migration 0016).
    "SlotMutex": lambda c, s: (
        _workflows(c, "W2"),
        _slot(c, "W1", slot_no=0, queued=0, acquired=0, released=10),
        _slot(c, "W2", slot_no=0, queued=5, acquired=5, released=15),
    ),
    "NoRunWithoutSlot": lambda c, s: c.execute(
        "update ilr.workflows set concurrency_key = 'acct', concurrency_limit = 1 where id = 'W1'"
    ),
    "SlotReleasedAtEnd": lambda c, s: _slot(c, "W1", slot_no=0, queued=0, acquired=0),
    "NoStrandedWaiter": lambda c, s: (_workflows(c, "W2", status="pending"), _slot(c, "W2", queued=0)),
    "RateRespected": lambda c, s: (
        _workflows(c, "W2", "W3"),
        c.execute("update ilr.workflows set queue = 'q', queue_limit = 1000, queue_rates = '{\"rate\": [1, 60]}'"),
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
    c.execute("insert into ilr.schedules (id, workflow_name, input, every_s) values ('S', 'refund', '{}', 10)")


def _tick(c, at: str, overlap: str) -> None:
    """A started tick of schedule S at ``at`` (SQL) and its running workflow, inserted now."""
    t = c.execute(f"select {at} as t").fetchone()["t"]
    wf_id = tick_workflow_id("S", t)
    _workflows(c, wf_id, status="running")
    c.execute(
        "insert into ilr.schedule_ticks (schedule_id, scheduled_at, kind, overlap, outcome, workflow_id, open, "
        "started_at) values ('S', %s, 'tick', %s, 'started', %s, true, clock_timestamp())",
        (t, overlap, wf_id),
    )


def _workflows(c, *ids: str, status: str = "completed") -> None:
    for wf_id in ids:
        c.execute(
            "insert into ilr.workflows (id, name, version, input, status) values (%s, 'refund', '1', '{}', %s)",
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
        "insert into ilr.slots (key, workflow_id, slot_limit, slot_no, queued_at, acquired_at, released_at, "
        f"released_why, not_before) values (%s, %s, 1, %s, {t}, {acq}, {rel}, "
        f"case when %s::float8 is null then null else 'completed' end, {nb})",
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
