"""Issue 46's worker logs, on real PostgreSQL with real ``manage.py ilr_worker`` subprocesses and a
real SIGKILL: a takeover, a fence, a reconnect are one INFO line each naming the workflow and the
epoch, and the exit line says what the worker did instead of only its heartbeat count."""

from __future__ import annotations

import re
import signal

from tests.support.db import invocations
from tests.support.queries.claims import EPOCH_OWNER_OF_CLAIMS_BY_WORKFLOW_ID
from tests.support.refund_harness import approve, refund_env
from tests.support.waits import wait_for

INFO = {"ILR_LOG_LEVEL": "INFO"}


def epochs(rt, wf_id: str) -> list[tuple[int, str]]:
    rows = rt.connection().execute(EPOCH_OWNER_OF_CLAIMS_BY_WORKFLOW_ID, (wf_id,))
    return [(r["epoch"], r["owner"]) for r in rows.fetchall()]


def test_takeover_after_sigkill_is_one_line_with_the_workflow_and_new_epoch(rt, workers):
    """A is SIGKILLed inside a step; B takes the workflow over once A's lease lapsed and says so in
    one INFO line naming the workflow, B's epoch (from ilr.claims) and A; B's exit line counts
    the claim, the takeover and the completion."""
    workers.start("A", lease_ttl=2, env=INFO)
    rt.start("slow", "tk1", {"seconds": 2})
    wait_for(lambda: invocations(rt, "tk1", "nap") == 1, message="A inside its step")
    workers.kill("A")  # SIGKILL: the lease is left to lapse
    b = workers.start("B", lease_ttl=2, env=INFO)
    assert rt.result("tk1", timeout=30) == 2
    history = epochs(rt, "tk1")
    assert [owner for _, owner in history] == ["A", "B"]
    new_epoch = history[1][0]
    lines = [line for line in workers.log("B").splitlines() if "took over" in line]
    assert len(lines) == 1, workers.log("B")
    assert re.search(
        rf"B: took over tk1 \(epoch {new_epoch}\) from A, whose lease lapsed [0-9.]+ s ago "
        r"\(takeover 1 since its last step\)",
        lines[0],
    ), lines[0]
    b.send_signal(signal.SIGTERM)
    assert b.wait(20) == 0
    exit_line = [line for line in workers.log("B").splitlines() if line.startswith("ilr_worker B: claimed")]
    assert len(exit_line) == 1, workers.log("B")
    assert re.match(
        r"ilr_worker B: claimed 1 run \(1 takeover\): 1 completed; heartbeat: \d+ beats, worst gap", exit_line[0]
    ), exit_line[0]


def test_exit_line_counts_runs_and_how_they_ended(rt, workers):
    """Three workflows run to their end (two complete, one fails: its result is not JSON) and one sleeps: the exit line
    says so, where it used to say only "heartbeat: 0 beats"."""
    proc = workers.start("w1", lease_ttl=30)
    rt.start("three_steps", "ok1", {})
    rt.start("three_steps", "ok2", {})
    rt.start("bad_output", "bad1", {})
    rt.start("sleeper", "zz1", {"seconds": 3600})
    rt.result("ok1", timeout=30)
    rt.result("ok2", timeout=30)
    wait_for(lambda: rt.describe("bad1")["status"] == "failed", message="bad1 failed")
    wait_for(lambda: rt.describe("zz1")["status"] == "sleeping", message="zz1 sleeping")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(20) == 0
    log = workers.log("w1")
    assert re.search(
        r"ilr_worker w1: claimed 4 runs \(0 takeovers\): 2 completed, 1 failed, 1 suspended; heartbeat: \d+ beats", log
    ), log


def test_fence_and_listen_reconnect_are_one_info_line_each(rt, workers):
    """The listen connection is terminated by the server: the worker logs the failure once and,
    once it listens again, one INFO line; a run fenced out (its lease lapsed while it was
    stopped) is one line naming the workflow and its epoch."""
    workers.start("A", lease_ttl=2, env={**INFO, "ILR_STOP_AT": "step_before_record"})
    wait_for(
        lambda: (
            rt.connection()
            .execute("select count(*) as n from pg_stat_activity where application_name = 'ilr-worker-A-listen'")
            .fetchone()["n"]
            == 1
        ),
        timeout=30,
        message="A's listen connection",
    )
    rt.connection().execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = 'ilr-worker-A-listen'"
    )
    wait_for(lambda: "A: reconnected: listening for wakeups again" in workers.log("A"), message="A's reconnect line")
    assert workers.log("A").count("listen connection failed") == 1
    rt.start("three_steps", "f1", {})
    workers.wait_state("A", "T")  # stopped before recording step1, holding epoch 1
    workers.start("B", lease_ttl=2)
    assert rt.result("f1", timeout=30) == {"counts": [2, 1, 1]}
    workers.procs["A"].send_signal(signal.SIGCONT)
    wait_for(
        lambda: "A: fenced out of f1 (epoch 1): workflow f1: " in workers.log("A"),
        message="A's fence line",
    )


def test_recovery_of_a_dispatched_effect_is_one_line_after_the_takeover(rt, workers, tmp_path):
    """A is SIGKILLed right after dispatching a refund (tier 1, the real payment target): B takes
    the workflow over and recovers the effect, each one INFO line with the workflow and the epoch
    of B's claim, the recovery line with the effect id and its outcome."""
    with refund_env(tmp_path, tier=1) as env:
        a = workers.start("A", lease_ttl=2, env=env.worker_env(ILR_KILL_AT="effect_after_dispatch"))
        case = env.case("rec1")
        rt.start("refund_signal", "rec1", case)
        approve(rt, "rec1")
        a.wait(30)
        assert a.returncode == -signal.SIGKILL, workers.log("A")
        workers.start("B", lease_ttl=2, env=env.worker_env(**INFO))
        result = rt.result("rec1", timeout=60)
    effect_id = rt.describe("rec1")["effects"][0]["effect_id"]
    history = epochs(rt, "rec1")
    took = next(e for e, owner in history if owner == "B")  # B's first claim: the takeover
    log = workers.log("B")
    assert re.search(rf"B: took over rec1 \(epoch {took}\) from A, whose lease lapsed", log), log
    assert log.count("took over") == 1, log
    # The recovery may wait for the send to settle (the workflow sleeps until then): its line
    # names the claim that resolved it, the last one.
    line = f"B: recovered effect {effect_id} of rec1 (epoch {history[-1][0]}): {result['status']}"
    assert log.count(line) == 1, log
