"""Temporal parity (issue 5; docs/temporal.md, docs/protocol.md §4, scenario S05 of §16.3): fork,
the runtime's counterpart of Temporal's reset (a committed effect is never resent, another
payload is refused as conflicting), and a decision recorded once across a kill, against real
PostgreSQL, real ``manage.py ilr_worker`` subprocesses and the real HTTP payment target.
"""

from __future__ import annotations

import signal

import pytest

from demo.peers.targets_client import http_json
from tests.support.db import claims
from tests.support.queries.steps import COUNT_LLM_CALLS_BY_WORKFLOW_ID_DEC1
from tests.support.refund_harness import approve, refund_env


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
        calls = rt.connection().execute(COUNT_LLM_CALLS_BY_WORKFLOW_ID_DEC1).fetchone()["n"]
        assert calls == 2  # one discarded, one recorded
        assert http_json("GET", f"{env.model_url}/admin/calls")[1]["total"] == 2
