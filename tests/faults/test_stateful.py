"""A Hypothesis state machine over the real system (issue 7).

Real PostgreSQL, real ``ilr_worker`` subprocesses, the real HTTP payment target and model stub.
Rules start refunds (some under a concurrency key shared with others), approve them, kill a
worker at a random kill point, SIGKILL or restart workers, revoke, cancel, signal, hand-refund,
crash PostgreSQL (restart-immediate) and let time pass. After every rule the whole invariants registry must hold.

Profiles: the default (CI) runs a bounded number of examples; ``HYPOTHESIS_PROFILE=long`` runs
up to 600 examples of 20 steps (by hand; its result goes in the closing note).
``ILR_LONG_EXAMPLES`` sets the number of examples, so the long run can be split over several
processes with different ``--hypothesis-seed`` values and separate ``ILR_DATA_DIR`` clusters.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from demo.peers.targets_client import http_json
from ilr import InvalidInput, WorkflowNotFound
from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr._invariants import check_all, violations
from tests.support import ROOT
from tests.support.workers import WorkerProcs

settings.register_profile(
    "ci", max_examples=2, stateful_step_count=12, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("ILR_LONG_EXAMPLES", "600")),
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

KILL_POINTS = [p for p in killpoints.POINTS if p != "claimed"] + ["claimed"]
LEASE_TTL = 2.0


class RuntimeMachine(RuleBasedStateMachine):
    """One example: a fresh database and target state, two to three workers, random faults."""

    env = None  # set by the test: the refund environment, test dsn, tmp path

    @initialize()
    def reset(self):
        env = self.env
        with db.connect(env["dsn"]) as conn:
            from tests.support.db import ILR_TABLES

            conn.execute(f"truncate {ILR_TABLES}, public.test_invocations restart identity cascade")
        http_json("POST", f"{env['refund'].target_url}/admin/reset", {})
        self.procs = WorkerProcs(env["tmp"])
        self.n_workers = 0
        self.cases: list[dict] = []
        self.grants: list[str] = []
        self.revokes: list[dict] = []
        self.rng = random.Random(len(env["tmp"].name))
        self.rt = env["rt"]
        self._start_worker()
        self._start_worker()

    def teardown(self):
        if hasattr(self, "procs"):
            self.procs.kill_all()

    def _start_worker(self, kill_at: str | None = None):
        self.n_workers += 1
        extra = self.env["refund"].worker_env(**({"ILR_KILL_AT": kill_at} if kill_at else {}))
        self.procs.start(f"w{self.n_workers}", lease_ttl=LEASE_TTL, poll=0.1, env=extra)

    def _alive(self):
        return [w for w, p in self.procs.procs.items() if p.poll() is None]

    # -- rules -------------------------------------------------------------------------------

    @rule(account=st.sampled_from([None, "acct:a", "acct:b"]))
    def start_refund(self, account):
        # Refunds of one account hold its concurrency key (issue 42): a second one queues behind
        # the first through its approval wait, kills, cancels and database crashes.
        case = self.env["refund"].case(f"c{len(self.cases)}-{time.monotonic_ns()}")
        self.rt.start("refund_signal", case["id"], case, concurrency_key=account)
        self.cases.append(case)

    @precondition(lambda self: self.cases)
    @rule()
    def approve_waiting(self):
        for case in self.cases:
            d = self.rt.describe(case["id"])
            if d["status"] == "sleeping" and (d["waiting"] or {}).get("signal") == "approve":
                steps = {s["name"]: s for s in d["steps"]}
                try:
                    self.grants.append(
                        self.rt.approve(
                            case["id"],
                            steps["propose"]["output"],
                            steps["pick_amount"]["output"]["premises"],
                            by="alice",
                        )
                    )
                except InvalidInput:
                    pass  # approved already, the approval is on its way

    @rule(point=st.sampled_from(KILL_POINTS))
    def start_worker_that_dies_at(self, point):
        self._start_worker(kill_at=point)

    # Preconditions and draws depend only on the machine's own record (workers it started),
    # never on which processes are alive right now: Hypothesis replays an example by its
    # choices, and data generation must not depend on external state.
    @rule()
    def start_worker(self):
        if len(self._alive()) < 3:
            self._start_worker()

    @rule(index=st.integers(min_value=0, max_value=7))
    def sigkill_a_worker(self, index):
        names = sorted(self.procs.procs)
        name = names[index % len(names)]
        if len(self._alive()) > 1:
            self.procs.kill(name)

    @precondition(lambda self: self.grants)
    @rule(data=st.data())
    def revoke_a_grant(self, data):
        grant = data.draw(st.sampled_from(self.grants))
        if any(r["grant_id"] == grant for r in self.revokes):
            # Revoked once: a second revoke is refused and changes nothing.
            with pytest.raises(InvalidInput, match="already revoked by bob"):
                self.rt.revoke(grant, by="bob")
            return
        returned = self.rt.revoke(grant, by="bob")
        self.revokes.append({"grant_id": grant, "returned": returned, "returned_at": time.time()})

    @precondition(lambda self: self.cases)
    @rule(data=st.data())
    def cancel_a_workflow(self, data):
        case = data.draw(st.sampled_from(self.cases))
        self.rt.cancel(case["id"], by="ops")

    @precondition(lambda self: self.cases)
    @rule(data=st.data())
    def signal_a_workflow(self, data):
        case = data.draw(st.sampled_from(self.cases))
        try:
            self.rt.signal(case["id"], "note", {"n": 1})
        except (InvalidInput, WorkflowNotFound):
            pass  # ended: takes no signals

    @precondition(lambda self: self.cases)
    @rule(data=st.data(), amount=st.sampled_from([500, 2000]))
    def hand_refund(self, data, amount):
        case = data.draw(st.sampled_from(self.cases))
        http_json(
            "POST", f"{self.env['refund'].target_url}/admin/hand_refund", {"payment": case["payment"], "amount": amount}
        )

    @rule()
    def crash_postgres(self):
        if not self.env["embedded"]:
            return
        from django.db import connections

        self.rt.close()
        crash = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "ilr_db", "restart-immediate"],
            cwd=ROOT,
            env=self.procs.env(),
            capture_output=True,
            text=True,
        )
        connections.close_all()
        assert crash.returncode == 0, crash.stdout + crash.stderr

    @rule(seconds=st.sampled_from([0.2, 0.5, 2.5]))
    def let_time_pass(self, seconds):
        time.sleep(seconds)

    # -- after every rule ---------------------------------------------------------------------

    steps_run = 0
    """Rules executed across all examples (reported by the long run)."""

    @invariant()
    def registry_holds(self):
        if not hasattr(self, "procs"):
            return
        RuntimeMachine.steps_run += 1
        if RuntimeMachine.steps_run % 100 == 0:  # progress of a long run (-s shows it)
            print(f"state machine: {RuntimeMachine.steps_run} steps checked at {time.strftime('%H:%M:%S')}", flush=True)
        with db.connect(self.env["dsn"]) as conn:
            snapshot_first = check_all  # the snapshot is read before the ledger, see below
            from ilr._invariants import Snapshot

            snap = Snapshot.load(conn)
        # Evidence read after the snapshot: whatever the snapshot shows committed was applied
        # before this read (CommittedImpliesApplied), and later applications are real ones.
        url = self.env["refund"].target_url
        snap.evidence = {
            "ledger": http_json("GET", f"{url}/ledger")[1]["rows"],
            "access_log": http_json("GET", f"{url}/access_log")[1]["entries"],
            "revokes": self.revokes,
        }
        from ilr._invariants import INVARIANTS

        results = {name: check(snap) for name, check in INVARIANTS.items()}
        assert violations(results) == {}, violations(results)
        del snapshot_first


def test_state_machine(rt, tmp_path, test_dsn):
    from django.conf import settings as dj

    from tests.support.refund_harness import refund_env

    with refund_env(tmp_path, 1, send_timeout=2.0, settle_margin=1.0) as env:
        RuntimeMachine.env = {
            "dsn": test_dsn,
            "refund": env,
            "tmp": tmp_path,
            "rt": rt,
            "embedded": bool(dj.DATABASES["default"].get("EMBEDDED_PGDATA")),
        }
        machine = RuntimeMachine.TestCase
        machine.settings = PROFILE
        try:
            machine("runTest").runTest()
        finally:
            print(
                f"state machine: {RuntimeMachine.steps_run} steps checked, profile "
                f"{os.environ.get('HYPOTHESIS_PROFILE', 'ci')}"
            )
