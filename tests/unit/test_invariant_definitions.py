"""NoOverlappingSends and TimerNotEarly check their full definitions (issue 39, docs/protocol.md
§11): every pair of consecutive sends of one effect, not only the first two; and every timer's
step (a sleep, a signal wait's timeout, a child wait's timeout), not only sleeps. The checks are
pure functions over a Snapshot, so the tests here build one by hand; tests/faults/
test_invariant_definitions.py runs a real signal wait that times out and checks the row it left."""

from __future__ import annotations

import datetime as dt

from ilr._invariants import Snapshot, no_overlapping_sends, timer_not_early

EID = "eff_overlap"
BY = {"workflow_id": "W1", "epoch": 1}
PAYLOAD = {"payment": "p1", "amount": 2000}
T0 = 1_700_000_000.0  # unix seconds: the first DISPATCHED's commit
SEND_TIMEOUT, SETTLE = 2.0, 2.0  # so a send authorized at t is in flight until t + 4


def snapshot(journal: dict | None = None, steps: list | None = None, access_log: list | None = None) -> Snapshot:
    evidence = {} if access_log is None else {"access_log": access_log}
    return Snapshot({}, steps or [], [], [], {}, {}, journal or {}, {}, [], {}, set(), evidence)


def dispatched(at: float) -> dict:
    return {
        "kind": "DISPATCHED",
        "ts": at,
        "effect": PAYLOAD,
        "by": BY,
        "send_deadline": at + SEND_TIMEOUT,
        "settle_margin": SETTLE,
    }


def resend(authorized: float, answered: float) -> list[dict]:
    """A recovery resend as the journal records it: the resend entry written before the bytes
    leave (RESENT) and the COMMITTED its answer brings, both naming T_resolve's time."""
    rechecked = {"lease_live": True, "violations": [], "at": authorized}
    return [
        {
            "kind": "RESENT",
            "ts": authorized,
            "by": BY,
            "rechecked": rechecked,
            "send_deadline": authorized + SEND_TIMEOUT,
            "settle_margin": SETTLE,
        },
        {"kind": "COMMITTED", "ts": answered, "via": "retry-idempotent", "by": BY, "rechecked": rechecked},
    ]


def post(at: float) -> dict:
    return {"method": "POST", "path": "/refunds", "key": EID, "t_wall": at, "body": PAYLOAD}


def test_three_sends_only_the_second_and_third_overlap():
    """The first send times out, a resend goes out after its settle deadline, and a third
    request lands while the resend is still in flight: only the 2nd-3rd pair overlaps."""
    journal = {EID: [dispatched(T0), *resend(T0 + 4.5, T0 + 5.2)]}
    sends = [post(T0 + 0.1), post(T0 + 4.6), post(T0 + 5.0)]
    found = no_overlapping_sends(snapshot(journal, access_log=sends))
    assert found and all(v["effect_id"] == EID for v in found), found
    assert any(v.get("send_at") == T0 + 5.0 for v in found), found


def test_a_third_send_overlapping_a_second_dispatch_is_found():
    """The first send is refused by the target (a resolving REFUSED, the effect back to
    proposed); a second DISPATCHED sends at once, which is no overlap; a third request under
    that dispatch, before its settle deadline, is."""
    refused = {"kind": "REFUSED", "ts": T0 + 0.3, "reason": "target rejected", "resolves": True}
    journal = {EID: [dispatched(T0), refused, dispatched(T0 + 0.5)]}
    sends = [post(T0 + 0.1), post(T0 + 0.6), post(T0 + 1.0)]
    found = no_overlapping_sends(snapshot(journal, access_log=sends))
    assert [v.get("send_at") for v in found] == [T0 + 1.0], found


def test_well_spaced_sends_hold():
    journal = {EID: [dispatched(T0), *resend(T0 + 4.5, T0 + 4.7), *resend(T0 + 9.0, T0 + 9.2)]}
    sends = [post(T0 + 0.1), post(T0 + 4.6), post(T0 + 9.1)]
    assert no_overlapping_sends(snapshot(journal, access_log=sends)) == []


def test_an_authorization_inside_the_previous_settle_window_is_found_from_the_journal():
    """Without an access log the journal alone shows the overlap: the resend was authorized
    before the dispatch's send_deadline + settle_margin."""
    journal = {EID: [dispatched(T0), *resend(T0 + 3.0, T0 + 3.2)]}
    found = no_overlapping_sends(snapshot(journal))
    assert [v.get("authorized_at") for v in found] == [T0 + 3.0], found


def _ts(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(T0 + seconds, dt.UTC)


def _step(seq: int, kind: str, recorded: float, output=None, error=None) -> dict:
    return {
        "workflow_id": "W1",
        "seq": seq,
        "name": kind,
        "kind": kind,
        "fingerprint": None,
        "output": output,
        "error": error,
        "epoch": 1,
        "created_at": _ts(recorded),
        "ts": T0 + recorded,
    }


def _signal_timeout(seq: int, until: float, recorded: float) -> dict:
    error = {
        "type": "SignalTimeout",
        "message": "no signal 'approve' within 5 s",
        "signal": "approve",
        "timeout": 5,
        "until": _ts(until).isoformat(),
    }
    return _step(seq, "signal", recorded, error=error)


def test_a_signal_wait_that_timed_out_early_is_found():
    found = timer_not_early(snapshot(steps=[_signal_timeout(1, until=5, recorded=4)]))
    assert [(v["workflow_id"], v["seq"]) for v in found] == [("W1", 1)], found


def test_a_child_wait_that_timed_out_early_is_found():
    output = {"child": "C1", "status": "timeout", "until": _ts(5).isoformat()}
    found = timer_not_early(snapshot(steps=[_step(1, "child", 4, output=output)]))
    assert [(v["workflow_id"], v["seq"]) for v in found] == [("W1", 1)], found


def test_timers_recorded_at_or_after_their_deadline_hold():
    steps = [
        _signal_timeout(1, until=5, recorded=5),
        _step(2, "signal", 1, output={"ok": 1}),  # a consumed signal: no timer fired
        _step(3, "sleep", 9, output={"until": _ts(8).isoformat()}),
        _step(4, "child", 2, output={"child": "C1", "status": "completed", "result": 1, "error": None}),
    ]
    assert timer_not_early(snapshot(steps=steps)) == []
