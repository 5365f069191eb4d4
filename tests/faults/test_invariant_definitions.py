"""TimerNotEarly on a real signal wait that times out (issue 39, docs/protocol.md §11): the row it
left holds, and is judged. Real worker subprocesses. The definitions, over hand-built
Snapshots, are in tests/unit/test_invariant_definitions.py."""

from __future__ import annotations

import datetime as dt

from ilr._invariants import Snapshot, timer_not_early


def test_a_real_signal_wait_timeout_holds_and_its_row_is_judged(rt, workers, test_dsn):
    """A real waiter times out: its step row holds TimerNotEarly, and the same row moved before
    its deadline is flagged (the check reads the row's real shape)."""
    from ilr import _db as db

    workers.start("A", lease_ttl=2)
    rt.start("waiter", "timer-sig", {"timeout": 0.5})
    assert rt.result("timer-sig", timeout=30) == {"payload": None}
    with db.connect(test_dsn) as conn:
        snap = Snapshot.load(conn)
    assert timer_not_early(snap) == []
    (step,) = [st for st in snap.steps if st["workflow_id"] == "timer-sig" and st["kind"] == "signal"]
    assert step["error"]["type"] == "SignalTimeout" and step["error"]["until"]
    step["created_at"] -= dt.timedelta(seconds=1)
    assert [v["seq"] for v in timer_not_early(snap)] == [step["seq"]]
