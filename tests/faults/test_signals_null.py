"""A signal whose payload is JSON null against a signal wait's timeout, on real PostgreSQL and
real worker subprocesses: ``ctx.wait_signal`` returns a payload exactly as sent (None included)
and raises ``SignalTimeout`` at its timeout, on the first run and on every replay; ``rt.signal``
and ``signal_in`` agree on null. Workflow: tests.support.flows.wake_waiter.
"""

from __future__ import annotations

import json

import pytest

from ilr import _db as db
from ilr import signal_in
from tests.support.queries.claims import OWNER_OF_CLAIMS_BY_WORKFLOW_ID_NULL_IN, SEED_CLAIMS_LEGACY
from tests.support.queries.deployments import ANY_DEPLOYMENTS_BY_NAME_VERSION_WAKE_WAITER
from tests.support.queries.signals import JSON_NULL_PAYLOAD_OF_SIGNALS_BY_WORKFLOW_ID_NAME, SEED_SIGNALS_LEGACY
from tests.support.queries.steps import SEED_STEPS_LEGACY, SQL_NULL_JSON_NULL_ERROR_ETC_OF_STEPS_BY_WORKFLOW_ID_SEQ
from tests.support.queries.workflows import SEED_WORKFLOWS_LEGACY
from tests.support.waits import wait_for

SIGNAL_BRANCH = {"branch": "signal", "payload": None}


def waiting_on(rt, wf_id: str, signal: str) -> bool:
    d = rt.describe(wf_id)
    assert d["status"] not in ("completed", "failed", "cancelled", "stuck"), (d["status"], d["result"], d["error"])
    return d["status"] == "sleeping" and (d["waiting"] or {}).get("signal") == signal


def wake_row(rt, wf_id: str) -> dict:
    """The recorded "wake" step (seq 1), with SQL NULL told apart from JSON null."""
    return (
        rt.connection()
        .execute(
            SQL_NULL_JSON_NULL_ERROR_ETC_OF_STEPS_BY_WORKFLOW_ID_SEQ,
            (wf_id,),
        )
        .fetchone()
    )


def test_null_signal_in_takes_the_signal_branch_and_replays_so_after_a_takeover(rt, workers, test_dsn):
    """signal_in(..., None) in the caller's transaction wakes a 30 s wait with None, not the
    timeout; a second worker, after the first is SIGKILLed, replays the wait from the steps
    table and gets None again."""
    workers.start("w1")
    rt.start("wake_waiter", "null-in", {"timeout": 30})
    wait_for(lambda: waiting_on(rt, "null-in", "wake"), message="null-in waiting on wake")
    with db.connect(test_dsn) as conn, conn.transaction():
        signal_in(conn, "null-in", "wake", None, sender="test")
    wait_for(lambda: waiting_on(rt, "null-in", "go"), timeout=10, message="null-in past wake, waiting on go")
    row = wake_row(rt, "null-in")
    sig_id = rt.describe("null-in")["signals"][0]["id"]
    assert row["json_null"] is True and row["error"] is None and row["fingerprint"] == f"signal:{sig_id}", row
    assert rt.describe("null-in")["steps"][1]["output"] == SIGNAL_BRANCH  # the first run's view
    workers.kill("w1")
    workers.start("w2")
    rt.signal("null-in", "go", {})
    assert rt.result("null-in", timeout=20) == {"seen": SIGNAL_BRANCH, "replayed": SIGNAL_BRANCH}
    assert rt.connection().execute(OWNER_OF_CLAIMS_BY_WORKFLOW_ID_NULL_IN).fetchone()["owner"] == "w2"


def test_rt_signal_none_delivers_json_null(rt, workers):
    """rt.signal(wf, "wake", None) stores JSON null in ilr.signals (not {}) and the wait returns None."""
    workers.start("w1")
    rt.start("wake_waiter", "null-rt", {"timeout": 30})
    wait_for(lambda: waiting_on(rt, "null-rt", "wake"), message="null-rt waiting on wake")
    rt.signal("null-rt", "wake", None)
    sig = rt.connection().execute(JSON_NULL_PAYLOAD_OF_SIGNALS_BY_WORKFLOW_ID_NAME).fetchone()
    assert sig["json_null"] is True, sig
    wait_for(lambda: waiting_on(rt, "null-rt", "go"), timeout=10, message="null-rt past wake, waiting on go")
    rt.signal("null-rt", "go", {})
    assert rt.result("null-rt", timeout=20) == {"seen": SIGNAL_BRANCH, "replayed": SIGNAL_BRANCH}


def test_a_real_timeout_raises_signal_timeout_and_again_on_replay(rt, workers):
    """timeout=0.5 with no signal: SignalTimeout (name, timeout) in the workflow, recorded
    distinguishably from a null payload, and raised again by the replay."""
    workers.start("w1")
    rt.start("wake_waiter", "to", {"timeout": 0.5})
    wait_for(lambda: waiting_on(rt, "to", "go"), timeout=10, message="to timed out, waiting on go")
    row = wake_row(rt, "to")
    assert row["sql_null"] is True and (row["error"] or {}).get("type") == "SignalTimeout", row
    timeout_branch = {"branch": "timeout", "name": "wake", "timeout": 0.5}
    rt.signal("to", "go", {})
    assert rt.result("to", timeout=20) == {"seen": timeout_branch, "replayed": timeout_branch}


LEGACY_TIMEOUT = {"branch": "timeout", "name": "wake", "timeout": 30}


@pytest.mark.parametrize(
    "timeout, output, expected",
    [
        (30, None, LEGACY_TIMEOUT),
        (30, "null", LEGACY_TIMEOUT),
        (None, "null", SIGNAL_BRANCH),
    ],
    ids=["timeout-sql-null", "timeout-json-null", "no-timeout-json-null"],
)
def test_a_signal_row_recorded_before_signal_timeout_replays_as_its_code_read_it(
    rt, workers, timeout, output, expected
):
    """A "signal" step row as the runtime recorded it before SignalTimeout (no error, no
    fingerprint; output NULL for a timeout, JSON null for a null payload) replays as that code
    read it: under a timeout its None was the timeout (the branch its original run took);
    without one, it could only be a null payload."""
    workers.start("w1")
    conn = rt.connection()
    wait_for(
        lambda: conn.execute(ANY_DEPLOYMENTS_BY_NAME_VERSION_WAKE_WAITER).fetchone(),
        message="wake_waiter@1 deployed by w1",
    )
    with conn.transaction():
        # Written the way rt.fork writes copied history: a synthetic claim at epoch 1 that the
        # step row carries (FencedWrites); the worker's claim is epoch 2.
        conn.execute(
            SEED_WORKFLOWS_LEGACY,
            (json.dumps({"timeout": timeout}),),
        )
        conn.execute(SEED_CLAIMS_LEGACY)
        conn.execute(
            SEED_STEPS_LEGACY,
            (output,),
        )
        if output is not None:
            conn.execute(SEED_SIGNALS_LEGACY)
    wait_for(lambda: waiting_on(rt, "legacy", "go"), timeout=10, message="legacy replayed, waiting on go")
    rt.signal("legacy", "go", {})
    assert rt.result("legacy", timeout=20) == {"seen": expected, "replayed": expected}
