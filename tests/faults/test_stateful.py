"""A Hypothesis state machine over the real system (issue 7).

Real PostgreSQL, real ``ilr_worker`` subprocesses, the real HTTP payment target and model stub.
Rules start refunds (some under a concurrency key shared with others), approve them, kill a
worker at a random kill point, SIGKILL or restart workers, revoke, cancel, signal, hand-refund,
crash PostgreSQL (restart-immediate) and let time pass. After every rule the whole invariants registry must hold.

Flow control (issue 42): starts under concurrency keys of limit 1 or 2 with ``on_conflict``
queue, reject or replace_queued (a rejected start leaves no row; replace_queued leaves no
earlier waiter of its key), ``ctx.lock`` blocks that may wait for a signal while they hold the
lock, a queue with a global limit of 2, a queue whose per-key rate puts starts off without a
slot (migration 0018), signals that let holders go on, and cancel and terminate of holders and
waiters alike. The slot invariants (SlotMutex, NoRunWithoutSlot, SlotReleasedAtEnd,
NoStrandedWaiter, SlotFifo, RateRespected) are among the registry checked after every rule.

Profiles: the default (CI) runs a bounded number of examples; ``HYPOTHESIS_PROFILE=long`` runs
up to 600 examples of 20 steps (by hand; its result goes in the closing note).
``ILR_LONG_EXAMPLES`` sets the number of examples, so the long run can be split over several
processes with different ``--hypothesis-seed`` values and separate ``ILR_DATA_DIR`` clusters.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from demo.peers.targets_client import http_json
from ilr import ConcurrencyLimitReached, InvalidInput, WorkflowNotFound
from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr._invariants import check_all, violations
from tests.support import ROOT
from tests.support.flows_flow_control import TEST_QUEUES
from tests.support.workers import WorkerProcs, registry_results

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
settings.register_profile(
    "ci_flow", max_examples=8, stateful_step_count=20, deadline=None, suppress_health_check=list(HealthCheck)
)
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
FLOW_PROFILE = settings.get_profile("ci_flow" if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else "long")

KILL_POINTS = [p for p in killpoints.POINTS if p != "claimed"] + ["claimed"]
LEASE_TTL = 2.0
SLOT_INVARIANTS = (
    "SlotMutex",
    "NoRunWithoutSlot",
    "SlotReleasedAtEnd",
    "NoStrandedWaiter",
    "SlotFifo",
    "RateRespected",
)
"""The flow-control invariants: in the registry that ``registry_holds`` runs after every rule."""
QUEUES_ENV = {"ILR_QUEUES": json.dumps(TEST_QUEUES)}
"""The queues of the flow rules, for the workers (the test sets them for rt.start)."""
FLOW_KEYS = ["k:1", "k:2"]
"""The keys every flow-control rule uses, as a concurrency key, a ctx.lock key or a queued
workflow's account key (few, so they collide; a start asking another limit joins under the
key's live one)."""


class FlowRules(RuleBasedStateMachine):
    """The flow-control rules (issue 42), shared by both machines below: starts under
    concurrency keys with each conflict policy, ctx.lock blocks, queues, signals that let a
    holder go on, and cancel or terminate of holders and waiters. A subclass sets ``rt`` and
    ``flows`` (the ids started) in its initialize rule."""

    rt: Any
    flows: list[str]

    def _flow_id(self, kind: str) -> str:
        wf_id = f"{kind}{len(self.flows)}-{time.monotonic_ns()}"
        self.flows.append(wf_id)
        return wf_id

    @rule(
        key=st.sampled_from(FLOW_KEYS),
        limit=st.sampled_from([1, 2]),
        on_conflict=st.sampled_from(["queue", "reject", "replace_queued", "cancel_running"]),
        wait=st.booleans(),
    )
    def start_keyed(self, key, limit, on_conflict, wait):
        # A holder that waits for a signal keeps its key until the signal (or its cancel).
        wf_id = self._flow_id("keyed")
        input = {"account": key, "wait_signal": wait, "seconds": 0.02}
        try:
            self.rt.start("keyed", wf_id, input, concurrency_key=key, concurrency_limit=limit, on_conflict=on_conflict)
        except ConcurrencyLimitReached as exc:
            assert on_conflict == "reject" and exc.key == key and exc.holders
            with pytest.raises(WorkflowNotFound):  # nothing was written
                self.rt.describe(wf_id)
            # Its id stays in self.flows: draws depend on the machine's own record only, never
            # on whether a holder had ended when the start came (the later rules skip it).
            return
        if on_conflict == "replace_queued":
            # Every start queued on the key before this one was ended (admissions since then only
            # take waiters away, and this client starts nothing meanwhile).
            # ctx.lock waiters are running workflows, not starts: they keep their place.
            waiting = {w["workflow_id"] for w in self.rt.concurrency(key)["waiting"]}
            assert {w for w in waiting if not w.startswith("locked")} <= {wf_id}, waiting
        if on_conflict == "cancel_running" and self.rt.describe(wf_id)["status"] == "pending":
            # Decided under the key's lock: a start that queued found the key full, and every
            # start holding it then has its cancel requested (by this start or an earlier one)
            # or has ended. A start holding it now held it then: the queued starts were ended,
            # so an admission since could only take a ctx.lock waiter ("locked...").
            state = self.rt.concurrency(key)
            if wf_id in {w["workflow_id"] for w in state["waiting"]}:
                for holder in state["holders"]:
                    if holder["workflow_id"].startswith("keyed"):
                        seen = self.rt.describe(holder["workflow_id"])
                        assert seen["cancel_requested_by"] or seen["status"] not in (
                            "pending",
                            "running",
                            "sleeping",
                        ), seen

    @rule(key=st.sampled_from(FLOW_KEYS), limit=st.sampled_from([1, 2]), wait_inside=st.booleans())
    def start_locked(self, key, limit, wait_inside):
        # ctx.lock on the keys the keyed starts use as concurrency keys: one workflow's lock and
        # other workflows' keys queue in one line.
        wf_id = self._flow_id("locked")
        self.rt.start("locked", wf_id, {"lock": key, "limit": limit, "wait_inside": wait_inside})

    @rule(key=st.sampled_from(FLOW_KEYS), put_off=st.booleans())
    def start_in_a_queue(self, key, put_off):
        # A queue of concurrency 2 (an account key of limit 1 inside it), or a queue of
        # concurrency 1 whose per-key rate (1/4s) puts a key's second start off without a slot.
        if put_off:
            self.rt.start("in_one_slow_per_key", self._flow_id("slow"), {"account": key})
        else:
            self.rt.start("in_two_at_a_time", self._flow_id("two"), {"account": key, "seconds": 0.05})

    @precondition(lambda self: self.flows)
    @rule(data=st.data())
    def let_a_holder_go_on(self, data):
        wf_id = data.draw(st.sampled_from(self.flows))
        try:
            self.rt.signal(wf_id, "go", {})
        except (InvalidInput, WorkflowNotFound):
            pass  # ended: takes no signals

    @precondition(lambda self: self.flows)
    @rule(data=st.data(), terminate=st.booleans())
    def end_a_holder_or_waiter(self, data, terminate):
        # Holders and waiters alike: a queued or put-off one ends at once (it never ran); a
        # holder releases when its run ends (cancel) or now (terminate), and the next waiter is
        # admitted in that transaction.
        wf_id = data.draw(st.sampled_from(self.flows))
        try:
            if terminate:
                if self.rt.terminate(wf_id, reason="state machine", by="ops"):
                    d = self.rt.describe(wf_id)
                    assert d["status"] == "terminated" and d["concurrency"] == [], d["concurrency"]
            else:
                self.rt.cancel(wf_id, by="ops")
        except WorkflowNotFound:
            pass  # a rejected start


class RuntimeMachine(FlowRules):
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
        self.flows: list[str] = []  # flow-control workflows started (keys, locks, queues)
        self.rng = random.Random(len(env["tmp"].name))
        self.rt = env["rt"]
        self._start_worker()
        self._start_worker()

    def teardown(self):
        if hasattr(self, "procs"):
            self.procs.kill_all()

    def _start_worker(self, kill_at: str | None = None):
        self.n_workers += 1
        extra = self.env["refund"].worker_env(**QUEUES_ENV, **({"ILR_KILL_AT": kill_at} if kill_at else {}))
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

        assert set(SLOT_INVARIANTS) <= set(INVARIANTS)
        results = {name: check(snap) for name, check in INVARIANTS.items()}
        assert violations(results) == {}, violations(results)
        del snapshot_first


def test_state_machine(rt, tmp_path, test_dsn, settings):
    from django.conf import settings as dj

    settings.ILR_QUEUES = TEST_QUEUES  # rt.start reads it; the workers get it in their environment

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


class FlowMachine(FlowRules):
    """Flow control alone, so that the CI budget reaches its rules (in the machine above they
    share each example with the refunds' rules): two workers that may be SIGKILLed and
    restarted, time, and the flow rules. Every example begins with key k:1 held by a workflow
    that waits for its signal, a start queued behind it, and a ctx.lock block on k:2 that waits
    inside. After every rule the whole registry must hold (without a target, the ledger's
    checks are skipped)."""

    env = None  # set by the test: the test dsn and tmp path, the Runtime

    @initialize()
    def reset(self):
        with db.connect(self.env["dsn"]) as conn:
            from tests.support.db import ILR_TABLES

            conn.execute(f"truncate {ILR_TABLES}, public.test_invocations restart identity cascade")
        self.procs = WorkerProcs(self.env["tmp"])
        self.n_workers = 0
        self.flows = []
        self.rt = self.env["rt"]
        self.start_worker()
        self.start_worker()
        self.rt.start("keyed", self._flow_id("keyed"), {"account": "k:1", "wait_signal": True}, concurrency_key="k:1")
        self.rt.start("keyed", self._flow_id("keyed"), {"account": "k:1"}, concurrency_key="k:1")
        self.rt.start("locked", self._flow_id("locked"), {"lock": "k:2", "wait_inside": True})

    def teardown(self):
        if hasattr(self, "procs"):
            self.procs.kill_all()

    @rule()
    def start_worker(self):
        if len([p for p in self.procs.procs.values() if p.poll() is None]) < 3:
            self.n_workers += 1
            self.procs.start(f"f{self.n_workers}", lease_ttl=LEASE_TTL, poll=0.1, env=QUEUES_ENV)

    @rule(index=st.integers(min_value=0, max_value=7))
    def sigkill_a_worker(self, index):
        # A holder's worker dies mid-step: the takeover keeps its slots (the release is its end's).
        names = sorted(self.procs.procs)
        if len([p for p in self.procs.procs.values() if p.poll() is None]) > 1:
            self.procs.kill(names[index % len(names)])

    @rule(seconds=st.sampled_from([0.1, 0.5, 1.5]))
    def let_time_pass(self, seconds):
        time.sleep(seconds)

    @invariant()
    def registry_holds(self):
        if not hasattr(self, "procs"):
            return
        bad = violations(registry_results(self.env["dsn"]))
        assert bad == {}, bad


def test_flow_control_state_machine(rt, tmp_path, test_dsn, settings):
    settings.ILR_QUEUES = TEST_QUEUES
    FlowMachine.env = {"dsn": test_dsn, "tmp": tmp_path, "rt": rt}
    machine = FlowMachine.TestCase
    machine.settings = FLOW_PROFILE
    machine("runTest").runTest()
