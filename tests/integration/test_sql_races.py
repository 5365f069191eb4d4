"""SQL races held open on a second connection (issue 7, the lock order of docs/protocol.md §2).

The runtime's own transactions (T_dispatch, the suspend transaction, T_resolve) run in a thread
on a real connection that pauses right after a chosen statement has run on the server, so the
transaction is held open at that point while a second connection races it with revoke, cancel
or signal.
Nothing here is emulated: the SQL, the locks and the constraints are PostgreSQL's.
"""

from __future__ import annotations

import json
import re
import threading
import time

import psycopg
import pytest

from demo.peers.targets_client import LocalRefunds
from ilr import Runtime
from ilr import _codec as codec
from ilr import _db as db
from ilr._context.context import WorkflowContext
from ilr._db.batch import Batch
from ilr._effects.call_state import EffectCallState
from ilr._effects.dispatch import t_dispatch
from ilr._effects.recovery import t_resolve
from ilr._errors import Suspend
from ilr._journal import journal
from ilr._queries.claims import CLAIM_SQL
from ilr._worker.claims import Run
from tests.support.queries.effects import (
    ALL_SETTLED_AGE_OF_EFFECTS,
    COUNT_EFFECTS_BY_EFFECT_ID,
    STATE_OF_EFFECTS,
    STATE_OF_EFFECTS_BY_EFFECT_ID,
    TAMPER_EFFECTS_PAYLOAD_HASH,
    TAMPER_EFFECTS_SEND_DEADLINE_SETTLE_MARGIN,
    TAMPER_EFFECTS_STATE_COMMITTED,
    TAMPER_EFFECTS_STATE_DISPATCHED,
)
from tests.support.queries.grants import LOCK_GRANTS_BY_ID, TAMPER_GRANTS_REVOKED_AT_BY_ID
from tests.support.queries.journal import (
    BODY_OF_JOURNAL_BY_KIND_DISPATCHED,
    BODY_OF_JOURNAL_BY_KIND_REFUSED,
    HASH_OF_JOURNAL_BY_EFFECT_ID,
    KIND_OF_JOURNAL,
    SEED_JOURNAL,
    TAMPER_DELETE_JOURNAL,
    TAMPER_JOURNAL_KIND,
)
from tests.support.queries.steps import TAMPER_DELETE_STEPS, TAMPER_STEPS_NAME
from tests.support.queries.workflows import LOCK_WORKFLOWS_BY_ID_RACE, STATUS_OWNER_OF_WORKFLOWS_BY_ID

PAYLOAD = {"payment": "p1", "amount": 2000}


class PausingConnection:
    """Wraps a psycopg connection: after a statement matching ``pattern`` runs, the calling
    thread waits until ``resume()`` (the transaction stays open, its locks held)."""

    def __init__(self, conn: psycopg.Connection, pattern: str):
        self._conn, self._pattern = conn, re.compile(pattern, re.S | re.I)
        self.paused, self._go = threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def matches(self, query) -> bool:
        return not self.paused.is_set() and bool(self._pattern.search(str(query)))

    def _after(self, query):
        if self.matches(query):
            self.paused.set()
            self._go.wait(30)

    def execute(self, query, params=None, **kw):
        cur = self._conn.execute(query, params, **kw)
        self._after(query)
        return cur

    def cursor(self, *a, **kw):
        outer, cur = self, self._conn.cursor(*a, **kw)

        class _Cur:
            def __getattr__(self, name):
                return getattr(cur, name)

            def execute(self, query, params=None, **kw2):
                cur.execute(query, params, **kw2)
                outer._after(query)
                return self

        return _Cur()

    def resume(self):
        self._go.set()


@pytest.fixture(autouse=True)
def batches_pause(monkeypatch):
    """T_dispatch and T_commit queue their statements on an ilr._db.batch.Batch, which sends a
    round trip's statements together. On a PausingConnection, a Batch sends and reads up to
    the matching statement, then pauses there: the server has run exactly the statements
    before the pause point, in the same transaction, as with the psycopg paths above."""
    execute = Batch.execute

    def pausing_execute(self, sql, params=None):
        result = execute(self, sql, params)
        if isinstance(self.conn, PausingConnection) and self.conn.matches(sql):
            self.fetch()
            self.conn._after(sql)
        return result

    monkeypatch.setattr(Batch, "execute", pausing_execute)


def blocked(fn, timeout=0.5):
    """Run ``fn(conn)`` in a new transaction with lock_timeout; True when it had to wait."""
    conn = db.connect(application_name="race-second")
    try:
        with conn.transaction():
            conn.execute(f"set local lock_timeout = '{int(timeout * 1000)}ms'")
            fn(conn)
        return False
    except psycopg.errors.LockNotAvailable:
        return True
    finally:
        conn.close()


def in_thread(fn, *args):
    out: dict = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            out["error"] = exc

    t = threading.Thread(target=run)
    t.start()
    return t, out


@pytest.fixture
def claimed(rt):
    """A claimed refund-shaped workflow, an approval grant and an in-process context on a
    real connection (no worker process: the test drives the transactions itself)."""
    rt.start("waiter", "race", {})
    conn = db.connect()
    row = conn.execute(CLAIM_SQL, {"names": ["waiter"], "versions": ["1"], "n": 1, "owner": "T", "ttl": 60}).fetchone()
    run = Run(row, 60, time.monotonic())
    grant = rt.grant("waiter", "refund", max_cents=5000, by="policy")
    yield rt, conn, run, grant
    conn.close()


def _state(run, conn, target, key, grant, local_premises=(), seq=1):
    """The state of a ``ctx.effect`` call at ``seq`` of an in-process context on ``conn``."""
    ctx = WorkflowContext(run, conn, {})
    call = EffectCallState.for_call(
        ctx, run, lambda: conn, target, key, PAYLOAD, None, grant, None, local_premises, False
    )
    call.seq = seq
    return call


def _call(run, conn, grant, target=None):
    target = target or LocalRefunds("http://127.0.0.1:9", tier=1, send_timeout=3, settle_margin=3)
    return _state(run, conn, target, "race-key", grant)


def _dispatch(conn, run, grant, pattern):
    pc = PausingConnection(conn, pattern)
    call = _call(run, pc, grant)
    return pc, call, in_thread(t_dispatch, call, [])


# -- revoke against T_dispatch -------------------------------------------------------------------


def test_revoke_waits_for_a_dispatch_holding_the_grant(claimed):
    rt, conn, run, grant = claimed
    pc, call, (t, out) = _dispatch(conn, run, grant, r"from ilr\.grants where id = %s for share")
    assert pc.paused.wait(10)
    assert blocked(lambda c: c.execute(TAMPER_GRANTS_REVOKED_AT_BY_ID, (grant,)))
    revoker, rv = in_thread(lambda: Runtime().revoke(grant, by="bob"))
    time.sleep(0.3)
    assert "value" not in rv  # still waiting on the FOR SHARE lock
    pc.resume()
    t.join(10)
    revoker.join(10)
    assert out.get("value") is None and "error" not in out  # DISPATCHED committed
    assert rv["value"] == [call.effect_id]  # so the revoke names it as one that may still land


def test_revoke_committed_before_the_grant_read_refuses_the_dispatch(claimed):
    rt, conn, run, grant = claimed
    pc, call, (t, out) = _dispatch(conn, run, grant, r"insert into ilr\.effects")
    assert pc.paused.wait(10)
    assert not blocked(lambda c: c.execute(TAMPER_GRANTS_REVOKED_AT_BY_ID, (grant,)))
    pc.resume()
    t.join(10)
    assert out["value"].status == "REFUSED:lease"
    assert rt.connection().execute(STATE_OF_EFFECTS).fetchone()["state"] == "proposed"


# -- cancel against T_dispatch -------------------------------------------------------------------


def test_cancel_waits_for_the_fenced_dispatch(claimed):
    rt, conn, run, grant = claimed
    pc, call, (t, out) = _dispatch(conn, run, grant, r"update ilr\.workflows")
    assert pc.paused.wait(10)
    assert blocked(lambda c: c.execute(LOCK_WORKFLOWS_BY_ID_RACE))
    canceller, cv = in_thread(lambda: Runtime().cancel("race", by="ops"))
    time.sleep(0.3)
    assert "value" not in cv
    pc.resume()
    t.join(10)
    canceller.join(10)
    assert out.get("value") is None  # dispatched before the cancel committed: allowed
    # The cancel, granted the row lock after T_dispatch committed, names the send it could not stop.
    assert cv["value"].requested is True and cv["value"].may_still_land == (call.effect_id,)
    wf = rt.describe("race")
    sent = [e for e in rt.connection().execute(BODY_OF_JOURNAL_BY_KIND_DISPATCHED).fetchall()]
    assert len(sent) == 1 and wf["cancel_requested_at"] is not None


def test_cancel_committed_first_refuses_the_dispatch(claimed):
    rt, conn, run, grant = claimed
    rt.cancel("race", by="ops")
    assert t_dispatch(_call(run, conn, grant), []).status == "REFUSED:cancelled"


# -- signal against the suspend transaction --------------------------------------------------------


def _suspend(conn, run, pattern):
    pc = PausingConnection(conn, pattern)
    ctx = WorkflowContext(run, pc, {})
    return pc, in_thread(ctx.wait_signal, "approve")


def test_signal_waits_for_the_suspend_and_then_wakes_it(claimed):
    rt, conn, run, _ = claimed
    pc, (t, out) = _suspend(conn, run, r"update ilr\.workflows")
    assert pc.paused.wait(10)
    assert blocked(lambda c: c.execute(LOCK_WORKFLOWS_BY_ID_RACE))
    sender, sv = in_thread(lambda: Runtime().signal("race", "approve", {"ok": 1}))
    time.sleep(0.3)
    assert "value" not in sv
    pc.resume()
    t.join(10)
    sender.join(10)
    assert isinstance(out.get("error"), Suspend)  # the suspend committed first...
    wf = rt.describe("race")
    assert wf["status"] == "sleeping" and wf["available_at"].year < 9999  # ...and the signal woke it (NoLostWakeup)


def test_signal_committed_first_is_consumed_by_the_suspend(claimed):
    rt, conn, run, _ = claimed
    rt.signal("race", "approve", {"ok": 2})
    ctx = WorkflowContext(run, conn, {})
    assert ctx.wait_signal("approve") == {"ok": 2}
    assert rt.describe("race")["signals"][0]["consumed_seq"] == 1


# -- revoke against T_resolve ----------------------------------------------------------------------


def test_revoke_waits_for_a_resolve_holding_the_grant(claimed):
    rt, conn, run, grant = claimed
    call = _call(run, conn, grant)
    assert t_dispatch(call, []) is None
    conn.execute(TAMPER_EFFECTS_SEND_DEADLINE_SETTLE_MARGIN)
    eff = conn.execute(ALL_SETTLED_AGE_OF_EFFECTS).fetchone()
    dispatched = [e for e in journal.parsed(conn, call.effect_id) if e["kind"] == "DISPATCHED"][-1]
    pc = PausingConnection(conn, r"from ilr\.grants where id = %s for share")
    call.connection = lambda: pc  # call.conn reads it for each transaction
    t, out = in_thread(t_resolve, call, eff, dispatched, [], False, None, True)
    assert pc.paused.wait(10)
    revoker, rv = in_thread(lambda: Runtime().revoke(grant, by="bob"))
    time.sleep(0.3)
    assert "value" not in rv
    pc.resume()
    t.join(10)
    revoker.join(10)
    assert out["value"][1] == "COMMITTED_BY_RETRY"  # tier 1, not stale: the resend was authorized
    assert rv["value"] == [call.effect_id]


# -- constraints ---------------------------------------------------------------------------------


def test_constraints_refuse_forks_second_commits_and_rewrites(claimed):
    rt, conn, run, grant = claimed
    call = _call(run, conn, grant)
    assert t_dispatch(call, []) is None
    eid = call.effect_id
    last = conn.execute(HASH_OF_JOURNAL_BY_EFFECT_ID, (eid,)).fetchone()["hash"]
    # A forked chain: a second entry with the same prev.
    with pytest.raises(psycopg.errors.UniqueViolation):
        with conn.transaction():
            for n in range(2):
                entry = journal.seal({"kind": "REFUSED", "effect_id": eid, "ts": n, "prev": last})
                conn.execute(
                    SEED_JOURNAL,
                    (eid, "REFUSED", codec.canonical(entry), last, entry["hash"]),
                )
    # A second COMMITTED, even with a correct prev link.
    with conn.transaction():
        journal.append(conn.cursor(), eid, "COMMITTED", 1.0, {"via": "test"})
    with pytest.raises(psycopg.errors.UniqueViolation, match="one_commit"):
        with conn.transaction():
            journal.append(conn.cursor(), eid, "COMMITTED", 2.0, {"via": "test"})
    for sql in (
        TAMPER_JOURNAL_KIND,
        TAMPER_DELETE_JOURNAL,
        TAMPER_STEPS_NAME,
        TAMPER_DELETE_STEPS,
    ):
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute(sql)
    with pytest.raises(psycopg.errors.RaiseException, match="payload binding"):
        conn.execute(TAMPER_EFFECTS_PAYLOAD_HASH)
    conn.execute(TAMPER_EFFECTS_STATE_COMMITTED)
    with pytest.raises(psycopg.errors.RaiseException, match="terminal"):
        conn.execute(TAMPER_EFFECTS_STATE_DISPATCHED)


# -- lock order ------------------------------------------------------------------------------------


def test_lock_order_workflow_effect_grant(claimed):
    """Every runtime transaction takes workflow, then effect, then grant. A transaction taking
    the grant and then the workflow deadlocks against a T_dispatch paused between its effect
    lock and its grant read (the control: this test can see a deadlock); one taking them in the
    runtime's order (cancel_in then revoke_in in one transaction) just waits and completes."""
    from ilr._ops.grants import revoke_in
    from ilr._ops.runtime import cancel_in

    rt, conn, run, grant = claimed
    pattern = r"insert into ilr\.effects .* on conflict \(effect_id\) do update .* returning \*"
    pc, call, (t, out) = _dispatch(conn, run, grant, pattern)
    assert pc.paused.wait(10)  # T_dispatch holds the workflow and effect rows
    wrong = db.connect(application_name="wrong-order")
    wrong.execute("begin")
    wrong.execute("set local deadlock_timeout = '100ms'")
    wrong.execute(LOCK_GRANTS_BY_ID, (grant,))
    pc.resume()  # T_dispatch now waits for the grant, which `wrong` holds
    time.sleep(0.2)
    deadlocked = False
    try:
        wrong.execute(LOCK_WORKFLOWS_BY_ID_RACE)
        wrong.execute("commit")
    except psycopg.errors.DeadlockDetected:
        deadlocked = True
        wrong.execute("rollback")
    t.join(20)
    wrong.close()
    deadlocked = deadlocked or isinstance(out.get("error"), psycopg.errors.DeadlockDetected)
    assert deadlocked, "the wrong lock order did not deadlock: the control failed"

    # The right order against a fresh paused dispatch (a new claim, a new effect key).
    conn.rollback()
    row = conn.execute(
        CLAIM_SQL.replace("status in ('pending','sleeping')", "status in ('pending','sleeping','running')")
        .replace("available_at <= now()", "true")
        .replace("lease_expires_at <= now()", "true"),
        {"names": ["waiter"], "versions": ["1"], "n": 1, "owner": "T2", "ttl": 60},
    ).fetchone()
    run2 = Run(row, 60, time.monotonic())
    pc2 = PausingConnection(conn, pattern)
    call2 = _state(
        run2,
        pc2,
        LocalRefunds("http://127.0.0.1:9", tier=1, send_timeout=3, settle_margin=3),
        "race-key-2",
        grant,
        seq=2,
    )
    t2, out2 = in_thread(t_dispatch, call2, [])
    assert pc2.paused.wait(10)
    right = db.connect(application_name="right-order")

    def right_order():
        with right.transaction():
            right.execute("set local deadlock_timeout = '100ms'")
            cancel_in(right, "race", by="ops")
            return revoke_in(right, grant, by="bob")

    t3, out3 = in_thread(right_order)
    time.sleep(0.3)
    assert "value" not in out3  # waiting on the workflow row, holding nothing T_dispatch needs
    pc2.resume()
    t2.join(20)
    t3.join(20)
    right.close()
    assert "error" not in out2 and "error" not in out3, (out2, out3)


# -- local premises inside T_dispatch ------------------------------------------------------------


def test_local_premises_read_inside_t_dispatch(claimed):
    """A local premise reads through T_dispatch's own transaction (its Batch): a violation it
    returns refuses the dispatch and nothing is sent; none lets it through."""
    rt, conn, run, grant = claimed
    seen = []

    def premise(cur):
        row = cur.execute(STATUS_OWNER_OF_WORKFLOWS_BY_ID, ("race",)).fetchone()
        seen.append(row)
        return [] if row["owner"] == "T" else ["the claim moved"]

    def refusing(cur):
        n = cur.execute(COUNT_EFFECTS_BY_EFFECT_ID, (call.effect_id,)).fetchone()["n"]
        return [f"{n} effect row(s) already"]

    call = _state(
        run,
        conn,
        LocalRefunds("http://127.0.0.1:9", tier=1, send_timeout=3, settle_margin=3),
        "race-key",
        grant,
        (premise, refusing),
    )
    out = t_dispatch(call, [])
    assert seen == [{"status": "running", "owner": "T"}]
    assert out.status == "REFUSED:stale_premise"
    kinds = [r["kind"] for r in conn.execute(KIND_OF_JOURNAL).fetchall()]
    assert kinds == ["PROPOSED", "AUTHORIZED", "REFUSED"]
    refused = json.loads(conn.execute(BODY_OF_JOURNAL_BY_KIND_REFUSED).fetchone()["body"])
    assert refused["reason"] == ["1 effect row(s) already"]

    call2 = _state(run, conn, call.target, "race-key-ok", grant, (premise,), seq=2)
    assert t_dispatch(call2, []) is None  # DISPATCHED committed
    assert conn.execute(STATE_OF_EFFECTS_BY_EFFECT_ID, (call2.effect_id,)).fetchone()["state"] == "dispatched"
