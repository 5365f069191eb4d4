"""The key lock's races, held open on real connections (issue 42, docs/protocol.md §5.4): a start
that queues while the holder's end commits, and the other way round. Either order ends with the
second workflow holding the slot: never a waiter beside a free slot (NoStrandedWaiter), never two
holders (SlotMutex). The holder's end is its status update, whose trigger releases the slot (the
worker's fenced end runs the same trigger)."""

from __future__ import annotations

import threading

import psycopg
import pytest

from ilr import _db as db
from ilr._invariants import check_all, violations
from ilr._ops.starts import start_in
from tests.support.queries.slots import (
    SET_SLOTS_NOT_BEFORE_BY_WORKFLOW_ID,
    SET_SLOTS_QUEUED_AT_DEFERRED_UNTIL_BY_WORKFLOW_ID_KEY,
)
from tests.support.queries.workflows import SET_WORKFLOWS_COMPLETED_BY_ID
from tests.support.waits import wait_for

END_HOLDER = SET_WORKFLOWS_COMPLETED_BY_ID


def _waits_on_advisory_lock(watch: psycopg.Connection, pid: int) -> bool:
    row = watch.execute("select wait_event_type, wait_event from pg_stat_activity where pid = %s", (pid,)).fetchone()
    return bool(row) and row["wait_event_type"] == "Lock" and row["wait_event"] == "advisory"


def _start_w2(conn) -> None:
    start_in(conn, "w2", "keyed", "1", '{"account": "acct:r"}', key="acct:r", limit=1)


@pytest.mark.parametrize("first", ["start", "end"])
def test_a_start_and_the_holders_end_racing_on_one_key_leave_the_slot_taken(rt, clean_db, first):
    rt.start("keyed", "w1", {"account": "acct:r"})
    with db.connect(clean_db) as a, db.connect(clean_db) as b, db.connect(clean_db) as watch:
        second_pid = (b if first == "start" else a).info.backend_pid
        done = threading.Event()

        def second() -> None:
            # The other transaction, which must wait for the first one's key lock.
            if first == "start":
                with b.transaction():
                    b.execute(END_HOLDER, ("w1",))
            else:
                with a.transaction():
                    _start_w2(a)
            done.set()

        with (a if first == "start" else b).transaction():
            if first == "start":
                _start_w2(a)  # queued: w1 holds the key; the key lock is held until commit
            else:
                b.execute(END_HOLDER, ("w1",))  # released: the slot is free until commit
            t = threading.Thread(target=second)
            t.start()
            wait_for(lambda: _waits_on_advisory_lock(watch, second_pid), message="the second waits for the key lock")
            assert not done.is_set()
        t.join(30)
        assert done.is_set()
    state = rt.concurrency("acct:r")
    assert [(h["workflow_id"], h["slot_no"]) for h in state["holders"]] == [("w2", 0)] and state["waiting"] == []
    assert rt.describe("w2")["waiting"] is None and rt.describe("w2")["available_at"] != "infinity"
    with db.connect(clean_db) as conn:
        bad = violations(check_all(conn, names={"SlotMutex", "NoStrandedWaiter", "SlotFifo", "SlotReleasedAtEnd"}))
    assert bad == {}


def test_a_signal_in_flight_to_the_first_waiter_does_not_cost_it_its_turn(rt, clean_db):
    """B and C wait behind A. A signal to B holds B's row while A's end admits the next: the
    admission waits for the signal's commit and admits B (it passed B over for C, and with no C
    left the slot free beside B)."""
    from ilr import signal_in

    for wf in ("A", "B", "C"):
        rt.start("keyed", wf, {"account": "acct:s"})
    with db.connect(clean_db) as s, db.connect(clean_db) as r, db.connect(clean_db) as watch:
        done = threading.Event()

        def end_holder() -> None:
            with r.transaction():
                r.execute(END_HOLDER, ("A",))
            done.set()

        with s.transaction():
            signal_in(s, "B", "note", {"n": 1})
            t = threading.Thread(target=end_holder)
            t.start()

            def blocked() -> bool:
                row = watch.execute(
                    "select wait_event_type from pg_stat_activity where pid = %s", (r.info.backend_pid,)
                ).fetchone()
                return bool(row) and row["wait_event_type"] == "Lock"

            wait_for(blocked, message="the admission waits for B's row")
        t.join(30)
        assert done.is_set()
    state = rt.concurrency("acct:s")
    assert [h["workflow_id"] for h in state["holders"]] == ["B"] and [w["workflow_id"] for w in state["waiting"]] == [
        "C"
    ]
    with db.connect(clean_db) as conn:
        assert violations(check_all(conn, names={"SlotFifo", "NoStrandedWaiter", "SlotMutex"})) == {}


SLOW = "queue:one_at_a_time_slow_per_key"
SLOT_CHECKS = {"SlotMutex", "NoStrandedWaiter", "SlotFifo", "SlotReleasedAtEnd", "RateRespected"}


def _queue_of_two_accounts(rt, settings) -> None:
    """X1 (account A) holds the queue's one slot; X2 (A again) is put off by A's rate of 1 per
    4 s, holding no slot; Y1 (account B) waits for the slot (migration 0018)."""
    from tests.support.flows_flow_control import TEST_QUEUES

    settings.ILR_QUEUES = TEST_QUEUES
    rt.start("in_one_slow_per_key", "X1", {"account": "acct:A"})
    rt.start("in_one_slow_per_key", "X2", {"account": "acct:A"})
    rt.start("in_one_slow_per_key", "Y1", {"account": "acct:B"})
    assert rt.describe("X2")["waiting"]["kind"] == "rate" and rt.describe("Y1")["waiting"]["kind"] == "slot"
    assert [h["workflow_id"] for h in rt.concurrency(SLOW)["holders"]] == ["X1"]


def test_a_release_passes_a_put_off_start_whose_turn_has_not_come(rt, clean_db, settings):
    _queue_of_two_accounts(rt, settings)
    with db.connect(clean_db) as conn:
        conn.execute(END_HOLDER, ("X1",))
    state = rt.concurrency(SLOW)
    assert [h["workflow_id"] for h in state["holders"]] == ["Y1"]
    assert [w["workflow_id"] for w in state["waiting"]] == ["X2"] and rt.describe("X2")["waiting"]["kind"] == "rate"
    with db.connect(clean_db) as conn:
        assert violations(check_all(conn, names=SLOT_CHECKS)) == {}


@pytest.mark.parametrize("first", ["sweep", "end"])
def test_the_sweep_and_the_holders_end_racing_admit_the_put_off_start_once(rt, clean_db, settings, first):
    """X2's turn has come (A's rate log moved back 10 s) and no sweep has run: the sweep and X1's
    end race on the queue key's lock. Either order admits X2 (ahead of Y1: it asked for the
    slot at its turn, before Y1) into the one slot, once, and leaves Y1 waiting."""
    _queue_of_two_accounts(rt, settings)
    with db.connect(clean_db) as conn:
        conn.execute(SET_SLOTS_NOT_BEFORE_BY_WORKFLOW_ID)
        conn.execute(
            SET_SLOTS_QUEUED_AT_DEFERRED_UNTIL_BY_WORKFLOW_ID_KEY,
            (SLOW,),
        )
    sweep, end = "select ilr.slot_wake()", END_HOLDER
    with db.connect(clean_db) as a, db.connect(clean_db) as b, db.connect(clean_db) as watch:
        done = threading.Event()

        def second() -> None:
            with b.transaction():
                b.execute(end if first == "sweep" else sweep, ("X1",) if first == "sweep" else None)
            done.set()

        with a.transaction():
            a.execute(sweep if first == "sweep" else end, None if first == "sweep" else ("X1",))
            t = threading.Thread(target=second)
            t.start()
            wait_for(lambda: _waits_on_advisory_lock(watch, b.info.backend_pid), message="the second waits for the key")
            assert not done.is_set()
        t.join(30)
        assert done.is_set()
    state = rt.concurrency(SLOW)
    assert [h["workflow_id"] for h in state["holders"]] == ["X2"] and [w["workflow_id"] for w in state["waiting"]] == [
        "Y1"
    ]
    assert rt.describe("X2")["waiting"] is None
    with db.connect(clean_db) as conn:
        assert violations(check_all(conn, names=SLOT_CHECKS)) == {}


def _waits_on_a_lock(watch: psycopg.Connection, pid: int) -> bool:
    row = watch.execute("select wait_event_type from pg_stat_activity where pid = %s", (pid,)).fetchone()
    return bool(row) and row["wait_event_type"] == "Lock"


@pytest.mark.parametrize("held", [False, True], ids=["empty-key", "held-key"])
def test_two_cancel_running_starts_racing_on_one_key_the_second_cancels_the_first(rt, clean_db, held):
    """s1 and s2 start with on_conflict="cancel_running" at once; s1's transaction is held open
    after its start (it holds the key's lock, and on a held key the old holder's row). s2 must
    decide once s1 has committed, as if it came after: s1 (holding the key, or queued for it)
    has its cancel requested or is ended by s2, and s2 waits for the slot. Deciding on holders
    read before the key's lock, s2 found an empty key holderless and queued behind s1,
    uncancelled."""
    rt.start("keyed", "old", {"account": "acct:c" if held else "acct:other"})  # deploys keyed@1 too
    by = "$concurrency:s2"
    with db.connect(clean_db) as a, db.connect(clean_db) as b, db.connect(clean_db) as watch:
        done = threading.Event()

        def second() -> None:
            with b.transaction():
                start_in(
                    b, "s2", "keyed", "1", '{"account": "acct:c"}', key="acct:c", limit=1, on_conflict="cancel_running"
                )
            done.set()

        with a.transaction():
            start_in(
                a, "s1", "keyed", "1", '{"account": "acct:c"}', key="acct:c", limit=1, on_conflict="cancel_running"
            )
            t = threading.Thread(target=second)
            t.start()
            wait_for(lambda: _waits_on_a_lock(watch, b.info.backend_pid), message="s2 waits for s1's locks")
            assert not done.is_set()
        t.join(30)
        assert done.is_set()
    state = rt.concurrency("acct:c")
    s1 = rt.describe("s1")
    if held:
        # s1 queued behind old (whose cancel it requested); s2 ended s1, a queued start.
        assert rt.describe("old")["cancel_requested_by"] == "$concurrency:s1"
        assert s1["status"] == "cancelled" and s1["cancel_requested_by"] == by
        assert [h["workflow_id"] for h in state["holders"]] == ["old"]
    else:
        # s1 took the free slot; s2 came after it and requested its cancel.
        assert s1["cancel_requested_by"] == by
        assert [h["workflow_id"] for h in state["holders"]] == ["s1"]
    assert [w["workflow_id"] for w in state["waiting"]] == ["s2"]
    with db.connect(clean_db) as conn:
        bad = violations(check_all(conn, names={"SlotMutex", "NoStrandedWaiter", "SlotFifo", "SlotReleasedAtEnd"}))
    assert bad == {}
