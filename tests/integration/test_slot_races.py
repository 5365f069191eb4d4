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
from tests.support.waits import wait_for

END_HOLDER = "update ilr.workflows set status = 'completed' where id = %s"


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
