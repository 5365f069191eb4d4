"""The refund demo (the quick start's main job, docs/quickstart.md): a model decides, a person
approves, a worker is SIGKILLed at a crash point, another recovers, and the ledger and the
receipt are checked.

Everything is real: embedded PostgreSQL (unless DATABASE_URL is set), ``manage.py ilr_worker``
subprocesses, the local HTTP payment target, the model stub behind the real ``anthropic`` SDK
(EMULATED model variance), and a real SIGKILL at an instrumented kill point.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from demo.peers.targets_client import http_json
from demo.plan import LEASE_TTL, PAID, SEND_TIMEOUT, SETTLE_MARGIN, crash_plan, expected
from demo.queries import HAS_APPROVAL_REQUESTS, OTHER_OWNER, PENDING_REQUEST
from demo.report import report

# Cases start at REFUND_VERSION, the code the demo's own workers run: with no version, rt.start
# takes the newest deployment, which an older checkout's deployment is until a worker of this
# code registers (then the case would wait at a version no worker of the demo's serves).
from demo.workflows import REFUND_VERSION
from ilr import ACTIVE, Runtime
from ilr._journal import keys

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Demo:
    tier: int = 1
    approve_as: str = "demo-approver"
    crash: str | None = "effect_after_send"
    out: object = sys.stdout
    workdir: Path = field(default_factory=lambda: Path(settings.DATA_DIR) / "demo" / time.strftime("%Y%m%d-%H%M%S"))
    procs: list = field(default_factory=list)
    worker_ids: set = field(default_factory=set)
    armed: set = field(default_factory=set)
    """Pids of the workers started with a kill point."""
    current: tuple | None = None
    """(worker id, process) of the worker that is to finish the case, once every kill happened."""
    worker_args: tuple = ()
    """Extra ``ilr_worker`` arguments (``demo --agent``: ``--import demo.agent_refund``)."""
    workflow: str = "refund"
    """The workflow the demo's case runs (named when a foreign worker claims it)."""

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def run(self) -> int:
        """Run the demo; return the exit status (0 when ledger and receipt match expectations)."""
        crash_plan(self.tier, self.crash)  # a bad choice is refused before anything starts
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.say(self._banner())
        where = (
            "DATABASE_URL"
            if os.environ.get("DATABASE_URL")
            else "embedded PostgreSQL 18 at " + str(settings.DATA_DIR / "pg")
        )
        self.say(f"  database: {where}")
        call_command("migrate", verbosity=0)
        if keys.key_path() is None:
            private, _ = keys.generate()
            self.say(f"  signing key: generated {private} (Ed25519, mode 0600)")
        from demo.peers.model_stub import model_stub_process
        from demo.peers.target import target_process

        with contextlib.ExitStack() as stack:
            stack.callback(self._stop_workers)
            target_url = stack.enter_context(
                target_process(tier=self.tier, queryable=self.tier == 1, ledger=self.workdir / "ledger.sqlite")
            )
            model_url = stack.enter_context(model_stub_process())
            self.say(f"  payment target: {target_url} (tier {self.tier}); model stub: {model_url} (EMULATED model)")
            return self._scenario(target_url, model_url, started)

    def _banner(self) -> str:
        return f"Interlock refund demo: tier {self.tier}, crash at {self.crash or 'none'}"

    def _worker(self, worker_id: str, model_url: str, kill_at: str | None) -> subprocess.Popen:
        self.worker_ids.add(worker_id)
        env = {**os.environ, "ILR_MODEL_BASE_URL": model_url, "PYTHONUNBUFFERED": "1"}
        env.pop("ILR_KILL_AT", None)
        if kill_at:
            env["ILR_KILL_AT"] = kill_at
        log = open(self.workdir / f"{worker_id}.log", "ab")
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "ilr_worker",
                "--id",
                worker_id,
                "--lease-ttl",
                str(LEASE_TTL),
                "--poll",
                "0.5",
                "--concurrency",
                "2",
                *self.worker_args,
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs.append(proc)
        if kill_at:
            self.armed.add(proc.pid)
        return proc

    def _stop_workers(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def _scenario(self, target_url: str, model_url: str, started: float) -> int:
        rt = Runtime()
        case_id = f"case-{time.strftime('%H%M%S')}-{os.getpid()}"
        case = self._new_case(case_id, target_url)
        payment = case["payment"]
        plan = crash_plan(self.tier, self.crash)
        if len(plan) > 1:
            self.say(
                f"  {self.crash} is reached only when a recovery resends: the first worker is SIGKILLed at "
                f"{plan[0]}, the one that recovers at {self.crash}, and a third recovers"
            )
        rt.start("refund", case_id, case, version=REFUND_VERSION)
        self.say(f"\n1. started workflow {case_id} (payment {payment}, paid ${PAID / 100:.2f})")
        try:
            proposal = self._drive(rt, case_id, model_url, plan)
            result = self._result(rt, case_id, timeout=90)
        except (RuntimeError, TimeoutError) as exc:  # a foreign claim, a kill point not reached, a timeout
            self.say(f"\nFAILED: {exc}")
            self._withdraw(rt, case_id, model_url)
            return 1
        except Exception as exc:  # noqa: BLE001 - reported, and the exit status says so
            self.say(f"\nFAILED: the workflow did not complete: {exc}")
            self._withdraw(rt, case_id, model_url)
            return 1
        status = self._report(rt, case_id, payment, target_url, result, proposal, started)
        if status:
            self._withdraw(rt, case_id, model_url)
        return status

    def _new_case(self, case_id: str, target_url: str) -> dict:
        """Create the case's payment at the target (PAID cents) and return the refund case."""
        payment = f"pay_{case_id}"
        http_json("POST", f"{target_url}/admin/payments", {"id": payment, "paid": PAID})
        return {
            "id": case_id,
            "payment": payment,
            "paid": PAID,
            "reason": "package arrived damaged",
            "verify_after": 0,
            "target": {
                "url": target_url,
                "tier": self.tier,
                "queryable": self.tier == 1,
                "send_timeout": SEND_TIMEOUT,
                "settle_margin": SETTLE_MARGIN,
            },
        }

    def _drive(self, rt: Runtime, case_id: str, model_url: str, plan: list[str]) -> dict:
        """Run the case through its crashes and its approval, in whatever order they come.

        The first worker carries ``plan[0]``; each time the worker carrying a kill point dies
        there, the next one is started (with the next point, if any) to recover. The approver
        approves once the workflow asks, before or after a crash (a point before the approval,
        such as ``claimed``, is passed first and recovered from). Returns once the approval is
        given and every planned kill has happened, watching for a foreign claim meanwhile.

        Returns:
            the approved proposal (the exact payload).

        Raises:
            RuntimeError: a foreign claim; the workflow ended, or a worker exited, other than
                planned (naming the kill point it did not reach).
            TimeoutError: 60 s without the next approval or kill.
        """
        pending = list(plan)
        n = 1
        worker_id = self._worker_id("w1")
        proc = self._worker(worker_id, model_url, pending[0] if pending else None)
        line = 2
        proposal = None
        deadline = time.monotonic() + 60
        while True:
            self._check_claims(rt, case_id)
            if pending and proc.poll() is not None:
                point = pending.pop(0)
                if proc.returncode != -signal.SIGKILL:
                    raise RuntimeError(
                        f"worker {worker_id} exited with {proc.returncode} before kill point {point}; "
                        f"see {self.workdir / (worker_id + '.log')}"
                    )
                n += 1
                next_id = self._worker_id(f"w{n}")
                self.say(
                    f"{line}. worker {worker_id} was SIGKILLed at kill point {point} "
                    f"(exit {proc.returncode}); starting {next_id} to recover"
                )
                line += 1
                worker_id, proc = next_id, self._worker(next_id, model_url, pending[0] if pending else None)
                deadline = time.monotonic() + 60
                continue
            d = rt.describe(case_id)
            ask = self._asked(rt, case_id, d) if proposal is None else None
            if ask is not None:
                proposal = ask["proposal"]
                self._say_asked(line, ask)
                grant_id, approvers = self._approve(rt, case_id, ask)
                self._say_approved(line + 1, ask, grant_id, approvers)
                line += 2
                deadline = time.monotonic() + 60
            if proposal is not None and not pending:
                self.current = (worker_id, proc)
                return proposal
            if not pending:
                self._check_alive(worker_id, proc)
            if d["status"] in ("completed", "failed", "stuck", "cancelled", "continued"):
                detail = f" ({d['error']})" if d["error"] else ""
                if pending:
                    raise RuntimeError(
                        f"workflow {case_id} ended {d['status']}{detail} before worker {worker_id} "
                        f"reached kill point {pending[0]}"
                    )
                raise RuntimeError(f"workflow {case_id} ended {d['status']}{detail} before it asked for approval")
            if time.monotonic() >= deadline:
                waited = "ask for approval" if proposal is None else f"reach kill point {pending[0]} in {worker_id}"
                raise TimeoutError(f"workflow {case_id} did not {waited} within 60 s")
            time.sleep(0.1)

    def _say_asked(self, line: int, ask: dict) -> None:
        """Print what the case asks a person to approve (``_asked``'s answer)."""
        self.say(
            f"{line}. the model decided {ask['proposal']['amount']} cents: {ask['decision']['response']['reasoning']!r}"
        )
        self.say(f"   premises it rested on: {ask['premises']}")

    def _say_approved(self, line: int, ask: dict, grant_id: str, approvers: list[str]) -> None:
        """Print the approval ``_approve`` gave."""
        self.say(f"{line}. {' and '.join(approvers)} approved exactly {ask['proposal']} as grant {grant_id}")

    @staticmethod
    def _asked(rt: Runtime, case_id: str, d: dict) -> dict | None:
        """What the case asks a person to approve, once it asks; else None.

        Either a pending approval request (``ctx.request_approval``, the review UI's queue) or a
        wait on the signal "approve" (``rt.approve``), whichever the refund workflow uses.

        Returns:
            {"proposal": the exact payload, "decision": the pick_amount step's record,
            "premises": the facts bound into the grant, "request": the request row or None}.
        """
        steps = {s["name"]: s for s in d["steps"]}
        if "pick_amount" not in steps:
            return None
        decision = steps["pick_amount"]["output"]
        if d["status"] == "sleeping" and (d["waiting"] or {}).get("signal") == "approve" and "propose" in steps:
            return {
                "proposal": steps["propose"]["output"],
                "decision": decision,
                "premises": decision["premises"],
                "request": None,
            }
        conn = rt.connection()
        if conn.execute(HAS_APPROVAL_REQUESTS).fetchone()["t"]:
            req = conn.execute(PENDING_REQUEST, (case_id,)).fetchone()
            if req is not None:
                return {"proposal": req["payload"], "decision": decision, "premises": req["premises"], "request": req}
        return None

    def _approve(self, rt: Runtime, case_id: str, ask: dict) -> tuple[str, list[str]]:
        """Approve what ``_asked`` found, as ``approve_as`` (and ``<approve_as>-second`` when the
        request needs two people). Returns (grant id, the approvers)."""
        req = ask["request"]
        if req is None:
            return rt.approve(case_id, ask["proposal"], ask["premises"], by=self.approve_as), [self.approve_as]
        approvers = [self.approve_as, f"{self.approve_as}-second"][: max(1, req["approvals_needed"])]
        after = None
        for by in approvers:
            after = rt.approve_request(req["id"], by=by)
        return after["grant_id"], approvers

    def _check_alive(self, worker_id: str, proc: subprocess.Popen) -> None:
        """Raise when ``proc``, the worker the run now relies on, has exited.

        Raises:
            RuntimeError: naming the worker, its exit status and its log's last line.
        """
        if proc.poll() is None:
            return
        log = self.workdir / f"{worker_id}.log"
        lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
        last = f": {lines[-1]}" if lines else ""
        raise RuntimeError(f"worker {worker_id} exited with {proc.returncode}{last} (log: {log})")

    def _withdraw(self, rt: Runtime, case_id: str, model_url: str, timeout: float = 30.0) -> bool:
        """A failed (or stopped) run's case leaves nothing in the shared review queue: cancel it
        and have a worker deliver the cancel, so it ends ``cancelled``. A worker of the demo's
        that is still running without a kill point does it, else a fresh one is started for it.

        Returns:
            True when the case has ended (cancelled, or it had ended already); False when it
            had not ended within ``timeout`` seconds (then it is said, with what to do).
        """
        from ilr import WorkflowNotFound

        try:
            request = rt.cancel(case_id, by="demo (run withdrawn)")
            if not request and rt.describe(case_id)["status"] not in ACTIVE:
                return True
            if not any(p.poll() is None and p.pid not in self.armed for p in self.procs):
                self._worker(self._worker_id("cleanup"), model_url, None)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                status = rt.describe(case_id)["status"]
                if status not in ACTIVE:
                    self.say(f"   case {case_id} withdrawn: {status}, so nothing of this run waits in the review queue")
                    return True
                time.sleep(0.1)
        except WorkflowNotFound:
            return True  # never started: nothing to withdraw
        except Exception as exc:  # noqa: BLE001 - the run has failed already; say what is left
            self.say(f"   could not withdraw case {case_id}: {exc}")
            return False
        self.say(
            f"   case {case_id}: cancel requested, not yet delivered after {timeout:.0f} s; the next worker "
            "serving the refund workflow ends it (or: python manage.py ilr_db reset)"
        )
        return False

    @staticmethod
    def _worker_id(name: str) -> str:
        # This run's own: a worker left behind by an earlier demo (killed with kill -9) has
        # another id, so a claim of its counts as a foreign one (_check_claims).
        return f"demo-{name}-{os.getpid()}"

    def _check_claims(self, rt: Runtime, case_id: str) -> None:
        """Raise when a worker that is not the demo's claimed the demo's workflow.

        The demo shares the database's work queue: a worker of the user's own that serves the
        refund workflow on the same database can claim the case first. It has not the demo's
        model stub, target or kill point, so the demo would wait for something that never
        comes. Every claim is in ilr.claims with its owner.

        Raises:
            RuntimeError: naming the other worker and what to do.
        """
        row = rt.connection().execute(OTHER_OWNER, (case_id, sorted(self.worker_ids))).fetchone()
        if row is not None:
            raise RuntimeError(
                f"workflow {case_id} was claimed by worker {row['owner']!r}, not by the demo's workers "
                f"({', '.join(sorted(self.worker_ids))}): another worker serving the {self.workflow} workflow "
                "polls this database. Stop it, or give the demo an embedded PostgreSQL of its own "
                "(ILR_DATA_DIR=.data/demo-only python manage.py demo)"
            )

    def _result(self, rt: Runtime, case_id: str, timeout: float) -> dict:
        """rt.result, watching once a second for a foreign claim (``_check_claims``) and for
        the demo's running worker exiting (``_check_alive``)."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_claims(rt, case_id)
            if self.current is not None:
                self._check_alive(*self.current)
            try:
                result = rt.result(case_id, timeout=min(1.0, max(0.0, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    status = rt.describe(case_id)["status"]
                    raise TimeoutError(
                        f"workflow {case_id} did not end within {timeout:.0f} s (status {status})"
                    ) from None
                continue
            self._check_claims(rt, case_id)  # a foreign worker may have finished it
            return result

    def _report(self, rt, case_id, payment, target_url, result, proposal, started) -> int:
        """demo.report.report against the outcome this tier and crash point must show."""
        expected_outcome = expected(self.tier, self.crash)
        return report(self.say, expected_outcome, rt, case_id, payment, target_url, result, proposal, started)
