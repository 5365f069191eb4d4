"""Failover with real clusters (prove.harness.failover): a primary of Debian's PostgreSQL server package
SIGKILLed mid-run under two real worker subprocesses, its streaming standby promoted, the
workers reconnecting through a multi-host URL (target_session_attrs=read-write).

Synchronous replication loses nothing acknowledged and applies nothing twice. Asynchronous
replication with the WAL sender stopped before the kill loses the tail (DISPATCHED and
COMMITTED entries among it), and still no tier-1 or tier-2 effect is applied twice, no epoch is
issued twice, and every receipt says only what the ledger shows.

Skipped only when no Debian PostgreSQL server is installed and CI is unset (.ci/run installs it).
"""

from __future__ import annotations

import io
import os

import pytest

from prove.peers.pg_cluster import have_server

LOSS_KEYS = ("steps", "journal", "signals", "claims", "effects_committed")


@pytest.fixture
def failover_run():
    if not have_server():
        if os.environ.get("CI"):
            pytest.fail("no Debian PostgreSQL server under /usr/lib/postgresql, and CI must run these tests")
        pytest.skip("no Debian PostgreSQL server under /usr/lib/postgresql (apt-get install postgresql)")
    from prove.harness.failover import run

    def go(mode: str, **kw) -> dict:
        out = io.StringIO()
        try:
            return run(mode, out=out, timeout=60, **kw)
        finally:
            print(out.getvalue())

    return go


def _no_promise_broken(row: dict) -> None:
    # First: a workflow that ended otherwise explains the figures below it (its error says why).
    assert row["workflow_statuses"] == {"completed": row["workflows"]}, row["workflow_errors"]
    assert row["duplicates"] == {"tier1": 0, "tier2": 0}, row["duplicates"]
    assert row["applications"] == {"tier1": row["workflows"], "tier2": row["workflows"]}, row["applications"]
    assert row["invariant_violations"] == {}, row["invariant_violations"]
    assert row["receipts"]["checked"] == 2 * row["workflows"]
    assert row["receipts"]["untruthful"] == 0, row["receipts"]
    assert row["epochs_issued_twice"] == 0
    assert row["lost_send_rule"]["broken"] == 0, row["lost_send_rule"]


def test_sync_failover_loses_nothing_acknowledged_and_applies_nothing_twice(failover_run):
    row = failover_run("sync", workflows=16)
    assert row["in_flight_at_kill"] > 0
    assert {k: row["lost_acknowledged"][k] for k in LOSS_KEYS} == dict.fromkeys(LOSS_KEYS, 0), row["lost_acknowledged"]
    assert row["signals_resent"] == 0
    _no_promise_broken(row)


def test_async_failover_loses_the_tail_yet_applies_no_tier12_effect_twice(failover_run):
    row = failover_run("async", workflows=16)
    lost = row["lost_acknowledged"]
    # The tail really held sends: dispatches (and commits) the new primary never saw.
    assert lost["journal_by_kind"].get("DISPATCHED", 0) > 0, lost
    assert lost["steps"] > 0, lost
    _no_promise_broken(row)
