"""Baseline (c), DBOS Transact (prove/peers/dbos_baseline.py), on real processes: the DBOS worker
subprocess on a system database of its own in the test cluster, the real HTTP target and model
stub, a grant in ilr.grants, real SIGKILL at a kill point and DBOS's own recovery on restart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ilr import _db as db
from tests.support import ROOT
from tests.support.refund_harness import refund_env
from tests.support.waits import wait_for


@pytest.fixture
def dbos_url(test_dsn):
    from prove.bench.dbos import system_database_url

    name = "ilr_test_dbos"
    with db.connect(test_dsn) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')
        conn.execute(f'create database "{name}"')
    yield system_database_url(name)
    with db.connect(test_dsn) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


class DbosWorker:
    """One ``python -m prove.peers.dbos_baseline worker`` subprocess; SIGKILLed at teardown."""

    def __init__(self, url: str, env: dict, log: Path):
        self.url, self.env, self.log = url, env, log
        self.proc: subprocess.Popen | None = None

    def start(self, executor_id: str = "dbos-1", **extra) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "prove.peers.dbos_baseline", "worker", "--url", self.url, "--id", executor_id],
                cwd=ROOT,
                env={**self.env, **extra},
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        line = self.proc.stdout.readline()
        assert line.startswith("ready"), (line, self.log.read_text())

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def dbos_case(tmp_path, rt, test_dsn, dbos_url):
    import os

    from dbos import DBOSClient

    with refund_env(tmp_path, tier=1, queryable=True) as env:
        worker_env = {
            **os.environ,
            "ILR_TARGET_URL": env.target_url,
            "ILR_TARGET_TIER": "1",
            "ILR_TARGET_QUERYABLE": "1",
            "ILR_SEND_TIMEOUT": "3",
            "ILR_PROVE_DSN": test_dsn,
            "ILR_MODEL_BASE_URL": env.model_url,
            "ILR_ATTEMPT_LOG": str(tmp_path / "attempts.jsonl"),
        }
        worker = DbosWorker(dbos_url, worker_env, tmp_path / "dbos.log")
        client = DBOSClient(system_database_url=dbos_url)
        try:
            yield env, worker, client
        finally:
            worker.stop()
            client.destroy()


def _start(env, client, case_id: str) -> str:
    from dbos import EnqueueOptions

    from prove.peers.dbos_baseline import QUEUE_NAME, WORKFLOW_NAME

    case = env.case(case_id)
    case.pop("target")
    options: EnqueueOptions = {"queue_name": QUEUE_NAME, "workflow_name": WORKFLOW_NAME, "workflow_id": case_id}
    client.enqueue(options, case)
    return case["payment"]


def _approve(rt, client, wf_id: str) -> dict:
    from prove.peers.dbos_baseline import APPROVE_TOPIC, PROPOSAL_EVENT

    proposal = client.get_event(wf_id, PROPOSAL_EVENT, timeout_seconds=30)
    assert proposal is not None, "no proposal within 30 s"
    grant = rt.grant("dbos", "refund", max_cents=proposal["amount"], by="alice")
    client.send(wf_id, {"grant_id": grant, "approved_amount": proposal["amount"]}, topic=APPROVE_TOPIC)
    return proposal


def _summary(test_dsn, wf_id: str) -> dict:
    """The harness's summary of the workflow's checkpoints (what the prove auditor reads)."""
    from psycopg.conninfo import make_conninfo

    from prove.peers.dbos_system import dbos_steps_summary

    with db.connect(make_conninfo(test_dsn, dbname="ilr_test_dbos")) as conn:
        rows = conn.execute(
            "select function_name, output, serialization, error, started_at_epoch_ms "
            "from dbos.operation_outputs where workflow_uuid = %s order by function_id",
            (wf_id,),
        ).fetchall()
    return dbos_steps_summary(rows)


def test_the_dbos_refund_completes_once_with_its_workflow_id_as_the_key(rt, dbos_case, test_dsn):
    env, worker, client = dbos_case
    worker.start()
    payment = _start(env, client, "dbos-happy")
    proposal = _approve(rt, client, "dbos-happy")
    result = client.retrieve_workflow("dbos-happy").get_result()
    assert result["status"] == "COMPLETED", result
    rows = env.ledger(payment)
    assert [(r["amount"], r["key"]) for r in rows] == [(proposal["amount"], "dbos-happy-refund")]
    summary = _summary(test_dsn, "dbos-happy")
    assert (summary["signals"], summary["refund_completed"], summary["decide_completed"]) == (1, True, 1), summary


def test_an_approval_that_times_out_is_no_signal_in_the_summary(dbos_case, test_dsn):
    from dbos import EnqueueOptions

    from prove.peers.dbos_baseline import QUEUE_NAME, WORKFLOW_NAME

    env, worker, client = dbos_case
    worker.start()
    case = env.case("dbos-expire")
    case.pop("target")
    case["approval_timeout"] = 1
    options: EnqueueOptions = {"queue_name": QUEUE_NAME, "workflow_name": WORKFLOW_NAME, "workflow_id": "dbos-expire"}
    client.enqueue(options, case)
    result = client.retrieve_workflow("dbos-expire").get_result()
    assert result == {"status": "approval expired"}, result
    summary = _summary(test_dsn, "dbos-expire")
    assert (summary["signals"], summary["refund_attempt"]) == (0, 0), summary


def test_a_sigkill_after_the_send_is_recovered_by_dbos_and_the_lookup_stops_a_second_refund(rt, dbos_case):
    env, worker, client = dbos_case
    worker.start(ILR_KILL_AT="effect_after_send")
    payment = _start(env, client, "dbos-kill")
    _approve(rt, client, "dbos-kill")
    wait_for(lambda: worker.proc.poll() is not None, timeout=30, message="the DBOS worker killed after the send")
    assert len(env.ledger(payment)) == 1
    worker.start()  # the same executor id: DBOS recovers its PENDING workflow and re-runs the step
    result = client.retrieve_workflow("dbos-kill").get_result()
    assert result["status"] == "COMPLETED", result
    assert len(env.ledger(payment)) == 1


def test_a_revoked_grant_refuses_the_dbos_refund_before_the_send(rt, dbos_case):
    env, worker, client = dbos_case
    worker.start()
    payment = _start(env, client, "dbos-revoke")
    from prove.peers.dbos_baseline import APPROVE_TOPIC, PROPOSAL_EVENT

    proposal = client.get_event("dbos-revoke", PROPOSAL_EVENT, timeout_seconds=30)
    grant = rt.grant("dbos", "refund", max_cents=proposal["amount"], by="alice")
    rt.revoke(grant, by="alice")
    client.send("dbos-revoke", {"grant_id": grant, "approved_amount": proposal["amount"]}, topic=APPROVE_TOPIC)
    result = client.retrieve_workflow("dbos-revoke").get_result()
    assert result["status"] == "REFUSED" and "not authorized" in result["error"], result
    assert env.ledger(payment) == []


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_stopped_dbos_step_goes_on_at_the_harness_sigcont(rt, dbos_case):
    """The harness's shim holds a stopped thread until SIGCONT; the wait is made 60 s here, so a
    step that went on only when the wait ran out (the SIGCONT missed) fails the 20 s condition."""
    import os
    import signal

    env, worker, client = dbos_case
    worker.start(ILR_STOP_AT="effect_before_dispatch@1", ILR_SHIM_STOP_WAIT_S="60")
    payment = _start(env, client, "dbos-stop")
    _approve(rt, client, "dbos-stop")
    pid = worker.proc.pid
    wait_for(lambda: _state(pid) == "T", timeout=30, message="the DBOS worker stopped at effect_before_dispatch")
    assert env.ledger(payment) == []
    os.kill(pid, signal.SIGCONT)
    wait_for(lambda: len(env.ledger(payment)) == 1, timeout=20, message="the refund sent after SIGCONT")
