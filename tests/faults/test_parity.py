"""Temporal parity (issue 5; docs/temporal.md, docs/protocol.md §4, §5.3, scenarios S05
and S14 of §16.3):
versioning with pinned workers and loud non-determinism, patches, child workflows,
continue-as-new, fork (reset), migrate, drain and retire, against real PostgreSQL and real
``manage.py ilr_worker`` subprocesses. The invariants registry runs at every teardown.
"""

from __future__ import annotations

import signal

import pytest

from demo.peers.targets_client import http_json
from ilr import InvalidInput, WorkflowFailed, WorkflowNotFound
from ilr._invariants import check_all
from tests.support.db import invocations
from tests.support.flows_versions import code_sha256, write_module
from tests.support.refund_harness import approve, refund_env
from tests.support.waits import failure_of, wait_for

# -- helpers -----------------------------------------------------------------------------------


def statuses(rt, ids) -> dict:
    rows = rt.connection().execute("select id, status from ilr.workflows where id = any(%s)", (list(ids),)).fetchall()
    return {r["id"]: r["status"] for r in rows}


def wait_all(rt, ids, status, timeout=30.0):
    wait_for(
        lambda: set(statuses(rt, ids).values()) == {status} and len(statuses(rt, ids)) == len(ids),
        timeout=timeout,
        message=f"{ids} all {status} (now {statuses(rt, ids)})",
    )


def wait_deployed(rt, name, version, timeout=30.0):
    wait_for(
        lambda: (
            rt.connection()
            .execute("select 1 from ilr.deployments where name = %s and version = %s", (name, version))
            .fetchone()
        ),
        timeout=timeout,
        message=f"{name}@{version} deployed by a worker",
    )


def shape(rt, wf_id) -> list[tuple[str, str]]:
    return [(s["kind"], s["name"]) for s in rt.describe(wf_id)["steps"]]


def claims(rt, wf_id) -> list[dict]:
    return (
        rt.connection()
        .execute("select epoch, owner, version from ilr.claims where workflow_id = %s order by epoch", (wf_id,))
        .fetchall()
    )


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
                "select bool_and(available_at < now() - interval '1.5 seconds') as due from ilr.workflows "
                "where id = any(%s)",
                (ids,),
            )
            .fetchone()["due"]
        ),
        timeout=20,
        message="v1 timers long due",
    )
    assert set(statuses(rt, ids).values()) == {"sleeping"}
    v2_claims = rt.connection().execute("select workflow_id, version from ilr.claims where owner = 'v2only'").fetchall()
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
    deployed = (
        rt.connection()
        .execute("select code_sha256 from ilr.deployments where name = 'versioned' and version = '1'")
        .fetchone()["code_sha256"]
    )
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


# -- children -------------------------------------------------------------------------------------


def test_child_completion_wakes_the_parent(rt, workers):
    workers.start("w1")
    rt.start("parent", "p1", {"child": {"seconds": 1.5, "x": 21}})
    waiting = wait_for(
        lambda: (
            (d := rt.describe("p1"))["status"] == "sleeping"
            and d["waiting"]
            and d["waiting"].get("kind") == "child"
            and d
        ),
        message="p1 waiting on its child",
    )
    assert waiting["waiting"] == {"seq": 2, "kind": "child", "name": "wait:p1/1", "child": "p1/1", "until": None}
    assert waiting["available_at"].year == 9999  # only the child's terminal write can wake it
    assert rt.result("p1", timeout=30) == {"child": "p1/1", "result": {"doubled": 42, "runs": 1}}
    d = rt.describe("p1")
    assert d["children"] == ["p1/1"]
    assert [(s["kind"], s["name"], s["fingerprint"]) for s in d["steps"]] == [
        ("child", "start:child_ok", None),
        ("child", "wait:p1/1", None),
    ]
    child = rt.describe("p1/1")
    assert child["parent_id"] == "p1" and child["status"] == "completed" and child["version"] == "1"

    # A timeout: the wait gives up (recorded), the child runs on.
    rt.start("parent", "p2", {"child": {"seconds": 3600}, "timeout": 1})
    assert rt.result("p2", timeout=30) == {"child": "p2/1", "timeout": True, "waited_on": "p2/1"}
    assert rt.describe("p2/1")["status"] == "sleeping"

    # A fork of the parent after the child started waits on the original's child.
    rt.fork("p1", 2, "p1-fork")
    assert rt.result("p1-fork", timeout=30) == {"child": "p1/1", "result": {"doubled": 42, "runs": 1}}
    assert rt.describe("p1-fork")["children"] == []


def test_child_failure_reaches_the_parent(rt, workers):
    workers.start("w1")
    rt.start("parent", "pf-caught", {"child": {"fail": True}, "catch": True})
    rt.start("parent", "pf", {"child": {"fail": True, "seconds": 0.5}})
    assert rt.result("pf-caught", timeout=30) == {
        "child": "pf-caught/1",
        "failed": "failed",
        "error_type": "StepFailed",
    }
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pf", timeout=30)
    assert err.value.status == "failed"
    assert err.value.error["type"] == "ChildFailed" and err.value.error["child"] == "pf/1"
    assert err.value.error["child_status"] == "failed"
    assert err.value.error["child_error"]["type"] == "StepFailed"
    assert rt.describe("pf/1")["status"] == "failed"
    assert invocations(rt, "pf/1", "boom") == 1


def test_cancelling_the_parent_cancels_its_running_child(rt, workers):
    workers.start("w1")
    rt.start("parent", "pc", {"child": {"seconds": 3600}})
    wait_for(
        lambda: (
            statuses(rt, ["pc", "pc/1"]) == {"pc": "sleeping", "pc/1": "sleeping"}
            and (rt.describe("pc")["waiting"] or {}).get("kind") == "child"
        ),
        message="parent and child asleep",
    )
    assert rt.cancel("pc", by="ops").requested is True
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pc", timeout=30)
    assert err.value.status == "cancelled"
    with pytest.raises(WorkflowFailed) as err:
        rt.result("pc/1", timeout=30)
    assert err.value.status == "cancelled"
    steps = rt.describe("pc/1")["steps"]
    assert [(s["kind"], s["error"]["type"]) for s in steps] == [("sleep", "Cancelled")]
    assert invocations(rt, "pc/1", "work") == 0
    # Who asked is recorded with the request, on the child as well; a second cancel changes nothing.
    assert rt.cancel("pc", by="someone-else").requested is False
    assert [rt.describe(w)["cancel_requested_by"] for w in ("pc", "pc/1")] == ["ops", "ops"]


# -- continue-as-new ------------------------------------------------------------------------------


def test_continue_as_new_three_times_and_result_follows_the_chain(rt, workers):
    workers.start("w1")
    rt.start("counter", "can", {"until": 3})
    assert rt.result("can", timeout=30) == {"n": 3, "id": "can#3"}
    chain = ["can", "can#1", "can#2", "can#3"]
    for i, wf_id in enumerate(chain):
        d = rt.describe(wf_id)
        assert d["continued_from"] == (chain[i - 1] if i else None)
        assert d["input"] == ({"until": 3, "n": i} if i else {"until": 3})
        assert invocations(rt, wf_id, "count") == 1
        if i < 3:
            assert d["status"] == "continued" and d["result"] == {"continued_as": chain[i + 1]}
    assert rt.describe("can#3")["status"] == "completed"
    with pytest.raises(InvalidInput):
        rt.signal("can", "ping", {})  # the chain ended: its current run takes no signal

    # A parent waiting on a child that continues-as-new follows the chain to its last run.
    rt.start("parent", "pcan", {"child_name": "counter", "child": {"until": 2, "seconds": 0.5}})
    assert rt.result("pcan", timeout=30) == {"child": "pcan/1", "result": {"n": 2, "id": "pcan/1#2"}}
    assert rt.describe("pcan/1#2")["parent_id"] == "pcan"


def test_cancel_and_signal_reach_the_current_run_of_a_chain(rt, workers):
    workers.start("w1")
    rt.start("counter", "cc", {"until": 2, "seconds": 3600, "sleep_from": 1})
    wait_for(
        lambda: statuses(rt, ["cc", "cc#1"]) == {"cc": "continued", "cc#1": "sleeping"},
        message="cc continued, cc#1 asleep",
    )
    rt.signal("cc", "ping", {"n": 1})
    assert [s["workflow_id"] for s in rt.describe("cc#1")["signals"]] == ["cc#1"]
    assert rt.cancel("cc", by="ops").requested is True
    with pytest.raises(WorkflowFailed) as err:
        rt.result("cc", timeout=30)
    assert err.value.status == "cancelled" and err.value.workflow_id == "cc#1"
    assert statuses(rt, ["cc", "cc#1"]) == {"cc": "continued", "cc#1": "cancelled"}


# -- fork (Temporal's reset) ---------------------------------------------------------------------


def _refunds(env, case):
    return [r for r in env.ledger(case["payment"]) if r["source"] == "api"]


@pytest.mark.parametrize("point", ["effect", "decide"])
def test_fork_never_resends_a_committed_effect(rt, workers, tmp_path, point):
    """ForkNeverResends: a fork from before a committed refund reaches the effect and gets
    DUPLICATE_IGNORED; the target holds one refund and saw one request."""
    with refund_env(tmp_path, 1) as env:
        workers.start("A", env=env.worker_env())
        case = env.case(f"fnr-{point}")
        rt.start("refund_signal", case["id"], case)
        approve(rt, case["id"])
        original = rt.result(case["id"], timeout=60)
        assert original["status"] == "COMMITTED"
        steps = rt.describe(case["id"])["steps"]
        at = next(s["seq"] for s in steps if s["kind"] == point)
        fork_id = rt.fork(case["id"], at, f"{case['id']}-fork")
        if point == "decide":
            _, proposal = approve(rt, fork_id)  # the fork decides again (2000) and waits for a person
            assert proposal["amount"] == 2000
        forked = rt.result(fork_id, timeout=60)
        assert forked["status"] == "DUPLICATE_IGNORED" and forked["effect_id"] == original["effect_id"]
        d = rt.describe(fork_id)
        assert d["forked_from"] == case["id"]
        assert [s["name"] for s in d["steps"][: at - 1]] == [s["name"] for s in steps[: at - 1]]
        assert all(s["epoch"] == 1 for s in d["steps"][: at - 1])  # copied under the $fork claim
        assert claims(rt, fork_id)[0] == {"epoch": 1, "owner": "$fork", "version": d["version"]}
        assert len(_refunds(env, case)) == 1 and sum(r["amount"] for r in env.ledger(case["payment"])) == 2000
        posts = [e for e in env.access_log() if e["method"] == "POST" and e["path"] == "/refunds"]
        assert len(posts) == 1


def test_s05_fork_before_the_decision_is_refused_as_conflicting_payload(rt, workers, tmp_path):
    """Scenario S05 for the runtime: the model re-decides 3000 after its first call; the first
    run is killed after its send and recovered (COMMITTED_BY_RETRY, $20); a fork from before the
    decision decides 3000, is approved for 3000, and its effect is REFUSED:conflicting_payload
    because the effect id (key refund:<case id>) is bound to the 2000 payload: $20, never $50."""
    with refund_env(tmp_path, 1) as env:
        assert http_json("POST", f"{env.model_url}/admin/script", {"redecide": True})[0] == 200
        a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_send"))
        case = env.case("s05")
        rt.start("refund_signal", "s05", case)
        _, proposal = approve(rt, "s05")
        assert proposal["amount"] == 2000
        a.wait(30)
        assert a.returncode == -signal.SIGKILL, workers.log("A")
        workers.start("B", lease_ttl=2, env=env.worker_env())
        original = rt.result("s05", timeout=60)
        assert original["status"] == "COMMITTED_BY_RETRY" and original["amount"] == 2000

        decide_seq = next(s["seq"] for s in rt.describe("s05")["steps"] if s["kind"] == "decide")
        rt.fork("s05", decide_seq, "s05-fork")
        _, proposal2 = approve(rt, "s05-fork")
        assert proposal2["amount"] == 3000  # the model re-decided
        forked = rt.result("s05-fork", timeout=60)
        assert forked["status"] == "REFUSED:conflicting_payload" and forked["amount"] == 3000
        assert forked["effect_id"] == original["effect_id"]
        assert len(_refunds(env, case)) == 1
        assert sum(r["amount"] for r in env.ledger(case["payment"])) == 2000  # $20, never $50
        refused = [e for e in rt.receipt(original["effect_id"])["entries"] if '"REFUSED"' in e]
        assert refused and "payload differs from recorded decision" in refused[-1]


def test_decision_recorded_once_across_a_kill(rt, workers, tmp_path):
    """ctx.decide is Temporal's recorded activity result for an LLM call: a worker killed after
    the model answered (before the record) discards that answer; the next claim calls again and
    records exactly one decision; both calls are counted in ilr.llm_calls."""
    with refund_env(tmp_path, 1) as env:
        a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="decide_after_response"))
        case = env.case("dec1")
        rt.start("refund_signal", "dec1", case)
        a.wait(30)
        assert a.returncode == -signal.SIGKILL, workers.log("A")
        assert rt.describe("dec1")["steps"] == []
        workers.start("B", lease_ttl=2, env=env.worker_env())
        approve(rt, "dec1")
        assert rt.result("dec1", timeout=60)["status"] == "COMMITTED"
        assert [s["kind"] for s in rt.describe("dec1")["steps"]].count("decide") == 1
        calls = (
            rt.connection()
            .execute("select count(*) as n from ilr.llm_calls where workflow_id = 'dec1'")
            .fetchone()["n"]
        )
        assert calls == 2  # one discarded, one recorded
        assert http_json("GET", f"{env.model_url}/admin/calls")[1]["total"] == 2


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
