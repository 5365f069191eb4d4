"""The claim statement (docs/protocol.md §3.1, issue 9): what it takes and in which order, and that
a backlog of due workflows does not make each claim read the whole backlog.

A single ``where (due) or (lapsed lease) order by available_at`` could only be planned as a bitmap
scan of both partial indexes plus a sort of every due row. The claim scans each partial index on its
own and stops after the rows it takes. These tests read the real plan (EXPLAIN ANALYZE on the test
database), not a timing.
"""

from __future__ import annotations

import json

import pytest

from ilr import _db as db
from ilr._queries.claims import CLAIM_SQL
from tests.support.queries.claims import COUNT_CLAIMS_BY_OWNER
from tests.support.queries.deployments import SEED_DEPLOYMENTS_PLAN
from tests.support.queries.workflows import (
    ANALYZE_WORKFLOWS,
    COUNT_WORKFLOWS_BY_STATUS_RUNNING,
    ID_OF_WORKFLOWS_BY_ID,
    LOCK_WORKFLOWS_BY_STATUS,
    SEED_WORKFLOWS_DUE,
    SEED_WORKFLOWS_LATER,
    SET_WORKFLOWS_LEASE_EXPIRES_AT_BY_ID_1_SECOND,
    SET_WORKFLOWS_PRIORITY,
    SET_WORKFLOWS_PRIORITY_BY_ID_DUE000001,
    SET_WORKFLOWS_PRIORITY_BY_ID_DUE000004,
    SET_WORKFLOWS_PRIORITY_BY_ID_DUE000005,
    SET_WORKFLOWS_STATUS_AVAILABLE_AT_BY_ID,
    SET_WORKFLOWS_STATUS_OWNER_LEASE_EXPIRES_AT,
    SET_WORKFLOWS_STATUS_OWNER_LEASE_EXPIRES_AT_BY_ID,
)

PARAMS = {"names": ["plan"], "versions": ["1"], "owner": "T", "ttl": 30}


@pytest.fixture
def conn(clean_db, django_db_blocker):
    with django_db_blocker.unblock():
        c = db.connect(clean_db)
        c.execute(SEED_DEPLOYMENTS_PLAN)
        yield c
        c.close()


def _backlog(conn, due: int) -> None:
    conn.execute(
        SEED_WORKFLOWS_DUE,
        (due,),
    )


def _claim(conn, n: int) -> list[dict]:
    return conn.execute(CLAIM_SQL, {**PARAMS, "n": n}).fetchall()


def _rows_read_from_workflows(plan: dict) -> int:
    """The most rows any scan of ilr.workflows in the plan returned."""
    most = 0
    stack = [plan["Plan"]]
    while stack:
        node = stack.pop()
        if node.get("Relation Name") == "workflows" and "Scan" in node["Node Type"]:
            most = max(most, int(node["Actual Rows"]))
        stack.extend(node.get("Plans", []))
    return most


@pytest.mark.parametrize("analyzed", [True, False], ids=["analyzed", "fresh-statistics"])
def test_a_claim_reads_what_it_takes_not_the_backlog(conn, analyzed):
    _backlog(conn, 5000)
    # A backlog whose rows were claimed and finished leaves dead index entries behind, too.
    for _ in range(50):
        ids = [r["id"] for r in _claim(conn, 8)]
        conn.execute(
            SET_WORKFLOWS_STATUS_OWNER_LEASE_EXPIRES_AT_BY_ID,
            (ids,),
        )
    if analyzed:
        conn.execute(ANALYZE_WORKFLOWS)
    with conn.transaction(force_rollback=True):
        (plan,) = conn.execute("explain (analyze, format json) " + CLAIM_SQL, {**PARAMS, "n": 8}).fetchone().values()
    plan = plan[0] if isinstance(plan, list) else json.loads(plan)[0]
    assert _rows_read_from_workflows(plan) <= 8 + 8, json.dumps(plan, indent=1)[:4000]


def test_due_rows_are_claimed_oldest_first_and_n_bounds_the_claim(conn):
    _backlog(conn, 30)
    taken = [r["id"] for r in _claim(conn, 4)]
    assert sorted(taken) == ["due000001", "due000002", "due000003", "due000004"]
    assert conn.execute(COUNT_WORKFLOWS_BY_STATUS_RUNNING).fetchone()["n"] == 4


def test_lapsed_leases_are_taken_first_and_count_against_n(conn, clean_db):
    _backlog(conn, 10)
    for r in _claim(conn, 3):  # three running rows whose leases then lapse
        conn.execute(SET_WORKFLOWS_LEASE_EXPIRES_AT_BY_ID_1_SECOND, (r["id"],))
    with conn.transaction():
        rows = _claim(conn, 5)
        # The due scan stopped at the two rows it took: it left no other row locked.
        with db.connect(clean_db) as other:
            unlocked = [r["id"] for r in other.execute(LOCK_WORKFLOWS_BY_STATUS)]
        assert unlocked == [f"due{i:06d}" for i in range(6, 11)]
    by_id = {r["id"]: r for r in rows}
    assert len(rows) == 5
    assert sorted(i for i, r in by_id.items() if r["prev_status"] == "running") == [
        "due000001",
        "due000002",
        "due000003",
    ]
    assert sorted(i for i, r in by_id.items() if r["prev_status"] == "pending") == ["due000004", "due000005"]
    assert all(r["takeovers"] == 1 for r in rows if r["prev_status"] == "running")
    # The claim history records each (TakeoverOnlyAfterExpiry reads it).
    assert conn.execute(COUNT_CLAIMS_BY_OWNER).fetchone()["n"] == 8


def test_a_live_lease_and_a_future_row_are_not_claimed(conn):
    _backlog(conn, 2)
    _claim(conn, 1)  # due000001 is now running with a live lease
    conn.execute(SET_WORKFLOWS_STATUS_AVAILABLE_AT_BY_ID)
    assert _claim(conn, 5) == []


def _index_names(plan: dict) -> set[str]:
    names, stack = set(), [plan["Plan"]]
    while stack:
        node = stack.pop()
        if node.get("Index Name"):
            names.add(node["Index Name"])
        stack.extend(node.get("Plans", []))
    return names


def test_due_rows_are_claimed_by_priority_then_oldest_first(conn):
    _backlog(conn, 6)
    conn.execute(SET_WORKFLOWS_PRIORITY_BY_ID_DUE000005)
    conn.execute(SET_WORKFLOWS_PRIORITY_BY_ID_DUE000004)
    conn.execute(SET_WORKFLOWS_PRIORITY_BY_ID_DUE000001)
    taken = [r["id"] for r in _claim(conn, 6)]
    # The claim returns rows in no promised order; what it takes, n at a time, is the order.
    conn.execute(SET_WORKFLOWS_STATUS_OWNER_LEASE_EXPIRES_AT)
    firsts = [[r["id"] for r in _claim(conn, 1)] for _ in range(6)]
    assert sorted(taken) == [f"due00000{i}" for i in range(1, 7)]
    assert [f[0] for f in firsts] == ["due000004", "due000005", "due000006", "due000002", "due000003", "due000001"]


def test_a_prioritized_backlog_is_read_through_its_own_index_not_scanned_whole(conn):
    _backlog(conn, 3000)
    conn.execute(SET_WORKFLOWS_PRIORITY)
    # A prioritized row that is not due yet (a deferred task) must not be taken.
    conn.execute(SEED_WORKFLOWS_LATER)
    conn.execute(ANALYZE_WORKFLOWS)
    with conn.transaction(force_rollback=True):
        (plan,) = conn.execute("explain (analyze, format json) " + CLAIM_SQL, {**PARAMS, "n": 8}).fetchone().values()
    plan = plan[0] if isinstance(plan, list) else json.loads(plan)[0]
    assert "wf_due_priority" in _index_names(plan), json.dumps(plan, indent=1)[:4000]
    assert _rows_read_from_workflows(plan) <= 8 + 8, json.dumps(plan, indent=1)[:4000]
    taken = {r["id"] for r in _claim(conn, 8)}
    assert "later" not in taken
    top = conn.execute(ID_OF_WORKFLOWS_BY_ID).fetchall()
    assert taken == {r["id"] for r in top}
