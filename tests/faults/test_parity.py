"""Temporal parity (issue 5; docs/temporal.md, docs/protocol.md §4, §5.3, scenarios S05
and S14 of §16.3):
versioning with pinned workers and loud non-determinism, patches, child workflows,
continue-as-new, fork (reset), migrate, drain and retire, against real PostgreSQL and real
``manage.py ilr_worker`` subprocesses. The invariants registry runs at every teardown.
"""

from __future__ import annotations

import pytest

from ilr import InvalidInput, WorkflowFailed, WorkflowNotFound
from ilr._invariants import check_all
from tests.support.db import claims, invocations, statuses
from tests.support.flows_versions import code_sha256, write_module
from tests.support.queries.claims import WORKFLOW_ID_VERSION_OF_CLAIMS_BY_OWNER
from tests.support.queries.deployments import (
    ANY_DEPLOYMENTS_BY_NAME_VERSION,
    CODE_SHA256_OF_DEPLOYMENTS_BY_NAME_VERSION,
)
from tests.support.queries.workflows import DUE_OF_WORKFLOWS_BY_ID
from tests.support.waits import failure_of, wait_for

# -- helpers -----------------------------------------------------------------------------------


def wait_all(rt, ids, status, timeout=30.0):
    wait_for(
        lambda: set(statuses(rt, ids).values()) == {status} and len(statuses(rt, ids)) == len(ids),
        timeout=timeout,
        message=f"{ids} all {status} (now {statuses(rt, ids)})",
    )


def wait_deployed(rt, name, version, timeout=30.0):
    wait_for(
        lambda: rt.connection().execute(ANY_DEPLOYMENTS_BY_NAME_VERSION, (name, version)).fetchone(),
        timeout=timeout,
        message=f"{name}@{version} deployed by a worker",
    )


def shape(rt, wf_id) -> list[tuple[str, str]]:
    return [(s["kind"], s["name"]) for s in rt.describe(wf_id)["steps"]]


def drain(rt, name, version) -> dict:
    rows = rt.drain_report(name, version)
    assert len(rows) == 1, rows
    return rows[0]


# -- S14: pinned workers, then a code change without a patch --------------------------------------


def test_s14_v2_workers_claim_no_v1_and_an_unpatched_change_is_loud(rt, workers, tmp_path):
    """Scenario S14: 10 v1 workflows sleeping; a v2-only worker claims none of them; a v1 worker
    drains them; then a v1 code change without a patch: the worker exits 2 naming name, version
    and both hashes, and with --allow-code-change the replay is stuck on NonDeterminism having
    run nothing (VersionPinned, NonDeterminismLoud, checked again by the registry at teardown)."""
    env, args = write_module(tmp_path, "original")
    workers.start("v1a", env=env, args=args)
    wait_deployed(rt, "versioned", "1")
    ids = [f"s14-{i}" for i in range(10)]
    for wf_id in ids:
        rt.start("versioned", wf_id, {"seconds": 3}, version="1")
    wait_all(rt, ids, "sleeping")
    assert all(invocations(rt, wf_id, "a") == 1 for wf_id in ids)
    workers.kill("v1a")

    workers.start("v2only", env=env, args=(*args, "--only", "versioned@2"))
    rt.start("versioned", "s14-v2", {}, version="2")
    assert rt.result("s14-v2", timeout=30) == {"code": "v2"}  # the v2-only worker is alive and claims v2
    # Every v1 timer is due, and has been for a while, with the v2-only worker polling every 0.1 s.
    wait_for(
        lambda: (
            rt.connection()
            .execute(
                DUE_OF_WORKFLOWS_BY_ID,
                (ids,),
            )
            .fetchone()["due"]
        ),
        timeout=20,
        message="v1 timers long due",
    )
    assert set(statuses(rt, ids).values()) == {"sleeping"}
    v2_claims = rt.connection().execute(WORKFLOW_ID_VERSION_OF_CLAIMS_BY_OWNER).fetchall()
    assert v2_claims == [{"workflow_id": "s14-v2", "version": "2"}]
    report = drain(rt, "versioned", "1")
    assert report["counts"] == {"sleeping": 10} and report["active"] == 10 and not report["drained"]
    assert report["oldest_pending"]["id"] == "s14-0"
    assert drain(rt, "versioned", "2")["drained"] and drain(rt, "versioned", "2")["counts"] == {"completed": 1}

    workers.start("v1b", env=env, args=args)
    for wf_id in ids:
        assert rt.result(wf_id, timeout=30) == {"code": "original"}
        assert {(c["owner"], c["version"]) for c in claims(rt, wf_id)} <= {("v1a", "1"), ("v1b", "1")}
        assert invocations(rt, wf_id, "a") == 1 and invocations(rt, wf_id, "b") == 1
    assert drain(rt, "versioned", "1")["drained"]
    assert check_all(rt.connection(), names=["VersionPinned"]) == {"VersionPinned": []}

    # A code change without a patch: a step inserted where the recorded history slept.
    nd = [f"s14-nd-{i}" for i in range(3)]
    for wf_id in nd:
        rt.start("versioned", wf_id, {"seconds": 2}, version="1")
    wait_all(rt, nd, "sleeping")
    workers.kill("v1b")
    deployed = rt.connection().execute(CODE_SHA256_OF_DEPLOYMENTS_BY_NAME_VERSION).fetchone()["code_sha256"]
    assert deployed == code_sha256("original")
    env2, args2 = write_module(tmp_path, "unpatched")
    refused = workers.start("changed", env=env2, args=args2)
    assert refused.wait(60) == 2, workers.log("changed")
    log = workers.log("changed")
    assert "'versioned'" in log and "version '1'" in log, log
    assert code_sha256("original") in log and code_sha256("unpatched") in log, log
    assert statuses(rt, nd) == {wf_id: "sleeping" for wf_id in nd}  # it claimed nothing

    workers.start("changed-allowed", env=env2, args=(*args2, "--allow-code-change"))
    wait_all(rt, nd, "stuck")
    for wf_id in nd:
        d = rt.describe(wf_id)
        assert d["error"]["type"] == "NonDeterminism" and d["error"]["seq"] == 2, d["error"]
        assert d["error"]["recorded"]["kind"] == "sleep" and d["error"]["offered"] == {
            "kind": "step",
            "name": "check",
            "fingerprint": None,
        }
        assert shape(rt, wf_id) == [("step", "a")]  # nothing recorded at or after the mismatch
        assert invocations(rt, wf_id, "check") == 0 and invocations(rt, wf_id, "b") == 0  # nothing ran
    with pytest.raises(WorkflowFailed) as err:
        rt.result(nd[0], timeout=5)
    assert err.value.status == "stuck"
    assert check_all(rt.connection(), names=["NonDeterminismLoud", "VersionPinned"]) == {
        "NonDeterminismLoud": [],
        "VersionPinned": [],
    }


def test_a_changed_step_name_in_recorded_history_is_nondeterminism(rt, workers, tmp_path):
    """The other shape of an unpatched change: the recorded row itself differs (seq 1)."""
    env, args = write_module(tmp_path, "patched")
    workers.start("p", env=env, args=args)
    wait_deployed(rt, "versioned", "1")
    rt.start("versioned", "nd-row", {"seconds": 2}, version="1")
    wait_all(rt, ["nd-row"], "sleeping")
    assert shape(rt, "nd-row") == [("step", "a"), ("patch", "add-check"), ("step", "check")]
    workers.kill("p")
    env2, args2 = write_module(tmp_path, "original")  # the patch removed outright: seq 2 is not a patch
    workers.start("o", env=env2, args=(*args2, "--allow-code-change"))
    wait_all(rt, ["nd-row"], "stuck")
    err = rt.describe("nd-row")["error"]
    assert err["type"] == "NonDeterminism" and err["seq"] == 2
    assert err["recorded"]["kind"] == "patch" and err["offered"]["kind"] == "sleep"
    assert invocations(rt, "nd-row", "b") == 0


# -- patches --------------------------------------------------------------------------------------


def test_patched_change_replays_old_histories_down_the_old_branch(rt, workers, tmp_path):
    """ctx.patched (docs/protocol.md §4, patches): histories recorded before the patch (sleeping at
    the patch point) replay down the old branch; new ones record the patch and replay down the new
    branch after their sleep."""
    env, args = write_module(tmp_path, "original")
    workers.start("orig", env=env, args=args)
    wait_deployed(rt, "versioned", "1")
    old = [f"old-{i}" for i in range(3)]
    for wf_id in old:
        rt.start("versioned", wf_id, {"seconds": 3}, version="1")
    wait_all(rt, old, "sleeping")
    workers.kill("orig")

    env2, args2 = write_module(tmp_path, "patched")
    workers.start("patched", env=env2, args=(*args2, "--allow-code-change"))
    new = [f"new-{i}" for i in range(3)]
    for wf_id in new:
        rt.start("versioned", wf_id, {"seconds": 1}, version="1")
    for wf_id in old:
        assert rt.result(wf_id, timeout=30) == {"code": "patched", "path": "old"}
        assert shape(rt, wf_id) == [("step", "a"), ("sleep", "sleep"), ("step", "b")]
        assert invocations(rt, wf_id, "check") == 0
    for wf_id in new:
        assert rt.result(wf_id, timeout=30) == {"code": "patched", "path": "new"}
        assert shape(rt, wf_id) == [
            ("step", "a"),
            ("patch", "add-check"),
            ("step", "check"),
            ("sleep", "sleep"),
            ("step", "b"),
        ]
        assert invocations(rt, wf_id, "check") == 1 and invocations(rt, wf_id, "a") == 1
        assert len(claims(rt, wf_id)) >= 2  # it slept after the patch and replayed it on the next claim


def test_deprecate_patch_retires_a_patch(rt, workers, tmp_path):
    """Retiring a patch (Temporal's deprecate_patch): patched histories replay under code that
    calls ctx.deprecate_patch, new runs record no patch row; a pre-patch history still open would
    be NonDeterminism, which is why the drain comes first."""
    env0, args0 = write_module(tmp_path, "original")
    workers.start("orig", env=env0, args=args0)
    wait_deployed(rt, "versioned", "1")
    rt.start("versioned", "pre", {"seconds": 15}, version="1")  # a pre-patch history, not drained
    wait_all(rt, ["pre"], "sleeping")
    workers.kill("orig")

    env, args = write_module(tmp_path, "patched")
    workers.start("patched", env=env, args=(*args, "--allow-code-change"))
    dep = ["dep-0", "dep-1"]
    for wf_id in dep:
        rt.start("versioned", wf_id, {"seconds": 3}, version="1")
    wait_all(rt, dep, "sleeping")
    assert all(("patch", "add-check") in shape(rt, wf_id) for wf_id in dep)
    workers.kill("patched")

    env2, args2 = write_module(tmp_path, "deprecated")
    workers.start("deprecated", env=env2, args=(*args2, "--allow-code-change"))
    rt.start("versioned", "fresh", {"seconds": 0}, version="1")
    for wf_id in dep:
        assert rt.result(wf_id, timeout=30) == {"code": "deprecated", "path": "new"}
        assert invocations(rt, wf_id, "check") == 1  # replayed from the patched history, not re-run
    assert rt.result("fresh", timeout=30) == {"code": "deprecated", "path": "new"}
    assert shape(rt, "fresh") == [("step", "a"), ("step", "check"), ("sleep", "sleep"), ("step", "b")]
    wait_all(rt, ["pre"], "stuck", timeout=30)
    assert rt.describe("pre")["error"]["type"] == "NonDeterminism"


# -- migrate, drain, retire --------------------------------------------------------------------------


def test_migrate_a_sleeping_workflow_to_v2(rt, workers):
    """rt.migrate moves a sleeping v1 workflow to v2, whose code replays its history; a
    v2-only worker finishes it. VersionPinned holds across the migration: claims before the
    $migrate claim ran v1, claims after it run v2."""
    workers.start("v1", args=("--only", "pinned@1"))
    workers.start("v2", args=("--only", "pinned@2"))
    wait_deployed(rt, "pinned", "2")
    rt.start("pinned", "m1", {"seconds": 3}, version="1")
    wait_all(rt, ["m1"], "sleeping")
    out = rt.migrate("m1", "2")
    assert out == {"workflow_id": "m1", "name": "pinned", "from_version": "1", "to_version": "2", "status": "sleeping"}
    assert rt.result("m1", timeout=30) == {"version": "2"}
    assert invocations(rt, "m1", "a") == 1  # replayed on v2, not re-run
    owners = [(c["owner"], c["version"]) for c in claims(rt, "m1")]
    assert owners[0] == ("v1", "1") and owners[1] == ("$migrate", "2") and set(owners[2:]) == {("v2", "2")}
    assert check_all(rt.connection(), names=["VersionPinned"])["VersionPinned"] == []


def test_drain_report_and_retire(rt, workers):
    workers.start("w1")
    wait_deployed(rt, "pinned", "1")
    wait_deployed(rt, "pinned", "2")
    rt.start("pinned", "d1", {"seconds": 3600}, version="1")
    rt.start("pinned", "d2", {"seconds": 0}, version="1")
    assert rt.result("d2", timeout=30) == {"version": "1"}
    wait_all(rt, ["d1"], "sleeping")
    report = drain(rt, "pinned", "1")
    assert report["counts"] == {"sleeping": 1, "completed": 1} and report["active"] == 1
    assert report["oldest_pending"]["id"] == "d1" and report["oldest_pending"]["status"] == "sleeping"
    assert not report["drained"] and report["retired_at"] is None
    retired_at = rt.retire("pinned", "1")
    assert rt.retire("pinned", "1") == retired_at  # the first retirement stands
    with pytest.raises(InvalidInput) as err:
        rt.start("pinned", "d3", {}, version="1")
    assert err.value.field == "version" and "retired" in err.value.rule
    rt.start("pinned", "d4", {})  # version=None: the newest unretired version
    assert rt.describe("d4")["version"] == "2"
    assert rt.result("d4", timeout=30) == {"version": "2"}
    assert drain(rt, "pinned", "1")["retired_at"] == retired_at
    rt.cancel("d1", by="ops")  # a retired version's workflows still run on its workers
    with pytest.raises(WorkflowFailed):
        rt.result("d1", timeout=30)
    assert drain(rt, "pinned", "1")["drained"]
    rt.retire("pinned", "2")
    with pytest.raises(InvalidInput) as err:
        rt.start("pinned", "d5", {})
    assert err.value.field == "version" and "every deployed version" in err.value.rule
    with pytest.raises(InvalidInput) as err:
        rt.retire("pinned", "7")
    assert err.value.field == "version"


# -- bad input: a clear error and nothing written -----------------------------------------------


def _counts(rt) -> dict:
    c = rt.connection()
    return {
        t: c.execute(f"select count(*) as n from ilr.{t}").fetchone()["n"]
        for t in ("workflows", "steps", "claims", "deployments")
    }


def test_bad_fork_and_migrate_write_nothing(rt, workers):
    workers.start("w1")
    rt.start("three_steps", "bi", {})
    rt.start("three_steps", "taken", {})
    rt.result("bi", timeout=30), rt.result("taken", timeout=30)
    rt.start("pinned", "pin", {"seconds": 3600}, version="1")
    wait_all(rt, ["pin"], "sleeping")
    before = _counts(rt)
    cases = [
        (lambda: rt.fork("bi", 5, "bi-f"), "at_seq", "beyond the history"),
        (lambda: rt.fork("bi", 0, "bi-f"), "at_seq", "integer >= 1"),
        (lambda: rt.fork("bi", 2, "taken"), "new_id", "already exists"),
        (lambda: rt.fork("bi", 2, "bi"), "new_id", "already exists"),
        (lambda: rt.migrate("bi", "1"), "workflow_id", "has ended"),
        (lambda: rt.migrate("pin", "9"), "to_version", "not deployed"),
        (lambda: rt.migrate("pin", ""), "to_version", "non-empty"),
    ]
    for call, field, words in cases:
        with pytest.raises(InvalidInput) as err:
            call()
        assert err.value.field == field and words in err.value.rule, (field, err.value)
    with pytest.raises(WorkflowNotFound):
        rt.fork("nope", 1, "x")
    with pytest.raises(WorkflowNotFound):
        rt.migrate("nope", "1")
    assert _counts(rt) == before
    assert rt.describe("pin")["version"] == "1" and rt.describe("pin")["epoch"] == 1
    assert rt.describe("taken")["forked_from"] is None

    # A running workflow does not migrate.
    rt.start("slow", "busy", {"seconds": 4})
    wait_for(
        lambda: statuses(rt, ["busy"]) == {"busy": "running"} and invocations(rt, "busy", "nap") == 1,
        message="busy running its step",
    )
    epoch = rt.describe("busy")["epoch"]
    with pytest.raises(InvalidInput) as err:
        rt.migrate("busy", "1")
    assert err.value.field == "workflow_id" and "is running" in err.value.rule
    assert rt.describe("busy")["epoch"] == epoch and len(claims(rt, "busy")) == 1
    assert rt.result("busy", timeout=30) == 4


def test_a_patch_id_at_two_places_fails_the_workflow_and_records_nothing_more(rt, workers):
    workers.start("w1")
    rt.start("patch_twice", "pt", {})
    e = failure_of(rt, "pt")
    assert e["type"] == "InvalidInput" and e["field"] == "patch_id" and "two places" in e["rule"], e
    assert shape(rt, "pt") == [("patch", "dup"), ("step", "between")]  # no second patch row


def test_a_child_id_under_another_parent_is_refused_and_nothing_written(rt, workers):
    workers.start("w1")
    rt.start("parent", "pa", {"child_id": "shared"})
    assert rt.result("pa", timeout=30)["child"] == "shared"
    rt.start("parent", "pb", {"child_id": "shared"})
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pb", timeout=30)
    e = err.value.error
    assert e["type"] == "InvalidInput" and e["field"] == "id" and "another parent ('pa')" in e["rule"], e
    assert rt.describe("pb")["steps"] == [] and rt.describe("pb")["children"] == []
    assert rt.describe("shared")["parent_id"] == "pa"
    # A top-level workflow's id is refused the same way.
    rt.start("three_steps", "solo", {})
    rt.start("parent", "pc", {"child_id": "solo"})
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pc", timeout=30)
    assert err.value.error["field"] == "id" and "top-level" in err.value.error["rule"]
    assert rt.describe("solo")["parent_id"] is None
