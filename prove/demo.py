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

from ilr import ACTIVE, Runtime, verify_receipt
from ilr._journal import keys
from ilr._killpoints import POINTS
from prove.peers.targets_client import http_json
from prove.workflows import REFUND_VERSION

ROOT = Path(__file__).resolve().parent.parent
# The harness timeouts (docs/protocol.md §16.1).
LEASE_TTL, SEND_TIMEOUT, SETTLE_MARGIN = 5.0, 3.0, 5.0
# Cases start at REFUND_VERSION, the code the demo's own workers run: with no version, rt.start
# takes the newest deployment, which an older checkout's deployment is until a worker of this
# code registers (then the case would wait at a version no worker of the demo's serves).
PAID = 10_000


UNREACHED = ("step_before_record", "step_after_record")
"""Kill points the refund workflow never reaches, so the demo does not offer them: it runs no
``ctx.step`` (its approval request's rows are written by ``ctx.request_approval``, which has no
kill point of its own). tests/faults/test_runtime_crash.py and the Prove harness cover them."""
DEMO_POINTS = tuple(p for p in POINTS if p not in UNREACHED)
"""The ``--crash`` choices (besides "none"): each one is reached and recovered from."""

RESEND_LEAD_IN = {1: "effect_after_send", 2: "effect_after_dispatch"}
"""For a kill point reached only in a recovery's resend (``resolve_after_commit``,
``resolve_after_send``): where the first worker is SIGKILLed so that the recovering worker
resends, by tier. Tier 1: after the send (the resend goes under the idempotency key); tier 2:
after T_dispatch, before any send (the lookup finds nothing, so the recovery reapplies). Tier 3
never resends after a crash, so it never reaches them."""


def crash_plan(tier: int, crash: str | None) -> list[str]:
    """The kill points of the demo's workers, in the order they are started: worker n is
    SIGKILLed at ``plan[n-1]``, and the worker after the last one recovers.

    Returns:
        [] for no crash; [crash] for a point the first worker reaches (before the approval:
        ``claimed``, ``decide_after_response``, ``wait_after_suspend``; or after it:
        ``effect_*``); [lead-in, crash] for a ``resolve_*`` point (RESEND_LEAD_IN).

    Raises:
        ValueError: not in DEMO_POINTS, or a ``resolve_*`` point at tier 3 (nothing resends).
    """
    if crash in (None, "none"):
        return []
    if crash not in DEMO_POINTS:
        raise ValueError(f"--crash: {crash!r} is not one of the demo's kill points ({', '.join(DEMO_POINTS)})")
    if crash.startswith("resolve_"):
        if tier not in RESEND_LEAD_IN:
            raise ValueError(
                f"--crash {crash} is reached only in a recovery's resend, and tier {tier} never "
                "resends after a crash (the effect becomes AMBIGUOUS); use --tier 1 or --tier 2"
            )
        return [RESEND_LEAD_IN[tier], crash]
    return [crash]


@dataclass
class Expectation:
    status: set[str]
    refunds: int
    happened: object


def expected(tier: int, crash: str | None) -> Expectation:
    """What the ledger and the receipt must show for a tier and crash point."""
    if crash in (None, "none"):
        return Expectation({"COMMITTED"}, 1, True)
    sent = crash in ("effect_after_send", "effect_after_commit", "resolve_after_send")
    if tier == 3 and crash in ("effect_after_dispatch", "effect_after_send"):
        return Expectation({"AMBIGUOUS"}, 1 if sent else 0, "unknown")
    return Expectation({"COMMITTED", "COMMITTED_BY_RETRY", "COMMITTED_ON_QUERY", "REAPPLIED_AFTER_QUERY"}, 1, True)


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
    """Extra ``ilr_worker`` arguments (``demo --agent``: ``--import prove.agent_refund``)."""
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
        from prove.peers.model_stub import model_stub_process
        from prove.peers.target import target_process

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
        payment = f"pay_{case_id}"
        http_json("POST", f"{target_url}/admin/payments", {"id": payment, "paid": PAID})
        case = {
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
        if conn.execute("select to_regclass('ilr.approval_requests') is not null as t").fetchone()["t"]:
            req = conn.execute(
                "select id, payload, premises, approvals_needed from ilr.approval_requests "
                "where workflow_id = %s and status = 'pending' order by requested_at limit 1",
                (case_id,),
            ).fetchone()
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
        row = (
            rt.connection()
            .execute(
                "select owner from ilr.claims where workflow_id = %s and owner <> all(%s) order by epoch limit 1",
                (case_id, sorted(self.worker_ids)),
            )
            .fetchone()
        )
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

    def _wait_for_approval(self, rt: Runtime, case_id: str) -> tuple[dict, dict]:
        """(proposal, decision record) once the case asks for approval (``_asked``).

        Raises:
            RuntimeError: a foreign claim, or the workflow failed. TimeoutError: 60 s passed.
        """
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self._check_claims(rt, case_id)
            d = rt.describe(case_id)
            if d["status"] in ("failed", "stuck"):
                raise RuntimeError(f"workflow {case_id} ended {d['status']}: {d['error']}")
            ask = self._asked(rt, case_id, d)
            if ask is not None:
                return ask["proposal"], ask["decision"]
            time.sleep(0.1)
        raise TimeoutError(f"workflow {case_id} did not ask for approval within 60 s")

    def _report(self, rt, case_id, payment, target_url, result, proposal, started) -> int:
        expect = expected(self.tier, self.crash)
        d = rt.describe(case_id)
        conn = rt.connection()
        t0 = d["created_at"]
        self.say("\nTimeline (database clock, seconds since start)")
        events = [
            (
                c["claimed_at"],
                f"claim epoch {c['epoch']} by {c['owner']}"
                + (" (takeover after lease expiry)" if c["prev_status"] == "running" else ""),
            )
            for c in conn.execute("select * from ilr.claims where workflow_id = %s", (case_id,)).fetchall()
        ]
        events += [
            (
                s["created_at"],
                f"step {s['seq']} {s['kind']} {s['name']}"
                + (f" -> {s['output']['status']}" if s["kind"] == "effect" else ""),
            )
            for s in d["steps"]
        ]
        bundle = rt.receipt(result["effect_id"])
        import json

        for body in bundle["entries"]:
            e = json.loads(body)
            via = f" via {e['via']}" if e.get("via") else ""
            events.append((None, f"journal {e['kind']}{via}", e["ts"]))
        rows = []
        for ev in events:
            ts = ev[2] if len(ev) == 3 else ev[0].timestamp()
            rows.append((ts - t0.timestamp(), ev[1]))
        for offset, text in sorted(rows, key=lambda row: row[0]):
            self.say(f"  {offset:7.2f}s  {text}")
        ledger = [r for r in http_json("GET", f"{target_url}/ledger")[1]["rows"] if r["payment"] == payment]
        self.say("\nLedger (read from the payment target)")
        for r in ledger:
            self.say(f"  refund {r['id']}: {r['amount']} cents, source {r['source']}, key {r.get('key')}")
        if not ledger:
            self.say("  (no refund)")
        v = verify_receipt(bundle)
        self.say(f"\nEffectResult: {result['status']} ({result['effect_id']})")
        self.say("Receipt verify():")
        for k in (
            "valid",
            "tamper_evident",
            "happened",
            "happened_once",
            "authorized_when_fired",
            "assumptions_held",
            "sends",
        ):
            self.say(f"  {k:22s} {v[k]}")
        for p in v["problems"]:
            self.say(f"  problem: {p}")
        failures = []
        if result["status"] not in expect.status:
            failures.append(f"status {result['status']} not in {sorted(expect.status)}")
        if len(ledger) != expect.refunds or any(r["amount"] != proposal["amount"] for r in ledger):
            failures.append(f"ledger holds {len(ledger)} refund(s); expected {expect.refunds} of {proposal['amount']}")
        if not (v["valid"] and v["tamper_evident"]):
            failures.append("the receipt does not verify")
        if v["happened"] != expect.happened:
            failures.append(f"receipt says happened={v['happened']}, expected {expect.happened}")
        # After a reapply the receipt cannot rule out a late first send (A2), so it answers
        # happened_once "unknown" (verify()'s P2 rule); the ledger check above counts the refunds.
        once_ok = v["happened_once"] is True or (
            v["happened_once"] == "unknown" and result["status"] == "REAPPLIED_AFTER_QUERY"
        )
        if expect.happened is True and not (once_ok and v["authorized_when_fired"] and v["assumptions_held"]):
            failures.append("the receipt does not show one authorized application with its assumptions held")
        self.say(f"\nWall time: {time.monotonic() - started:.1f} s")
        if failures:
            self.say("FAILED: " + "; ".join(failures))
            return 1
        self.say("OK: the ledger and the receipt agree with the expected outcome.")
        return 0


# -- `manage.py demo --serve`: the admin and the review UI under gunicorn --------------------------

DEMO_USER = "demo-reviewer"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:``port`` (a bind as gunicorn's, SO_REUSEADDR, succeeds)."""
    import socket

    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def demo_login(username: str = DEMO_USER) -> tuple[str, str]:
    """Create (or reset) the demo-only reviewer: staff, every approvals permission and view rights
    on the ilr tables, with a fresh random password. Returns (username, password)."""
    import secrets

    from django.contrib.auth.models import Permission, User

    password = secrets.token_urlsafe(12)
    user, _ = User.objects.get_or_create(username=username)
    user.is_staff, user.is_active, user.is_superuser = True, True, False
    user.set_password(password)
    user.save()
    perms = Permission.objects.filter(content_type__app_label="approvals") | Permission.objects.filter(
        content_type__app_label="ilr", codename__startswith="view_"
    )
    user.user_permissions.set(perms)
    return username, password


@dataclass
class ServeDemo(Demo):
    """``demo --serve``: the target, the model stub and two workers as in the demo, one refund left
    waiting for approval, and gunicorn serving the admin and the review UI until interrupted."""

    port: int = 8000
    serve_for: float | None = None

    def serve(self) -> int:
        """Run until Ctrl-C, SIGTERM or ``serve_for`` seconds; return the exit status.

        The URL is printed only once this run's gunicorn has bound the port (its log says so)
        and answers HTTP 200 there. On the way out, failed or stopped, the case it left waiting
        is withdrawn (cancelled): its payment target stops with the demo.
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.say(f"Interlock approvals demo: the admin and the review UI under gunicorn (tier {self.tier})")
        if self.port and not port_free(self.port):
            self.say(
                f"FAILED: port {self.port} on 127.0.0.1 is in use (another server listens there); "
                "stop it, or pick another port (--port 0 takes a free one)"
            )
            return 1
        where = (
            "DATABASE_URL"
            if os.environ.get("DATABASE_URL")
            else f"embedded PostgreSQL 18 at {settings.DATA_DIR / 'pg'}"
        )
        self.say(f"  database: {where}")
        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        if keys.key_path() is None:
            private, _ = keys.generate()
            self.say(f"  signing key: generated {private} (Ed25519, mode 0600)")
        from prove.peers.model_stub import model_stub_process
        from prove.peers.target import target_process

        stop = {"now": False}
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
        try:
            with contextlib.ExitStack() as stack:
                stack.callback(self._stop_workers)
                target_url = stack.enter_context(
                    target_process(tier=self.tier, queryable=self.tier == 1, ledger=self.workdir / "ledger.sqlite")
                )
                model_url = stack.enter_context(model_stub_process())
                self.say(f"  payment target: {target_url} (tier {self.tier}); model stub: {model_url} (EMULATED model)")
                for name in ("w1", "w2"):
                    self._worker(self._worker_id(name), model_url, None)
                rt = Runtime()
                stack.callback(rt.close)
                case_id = f"case-{time.strftime('%H%M%S')}-{os.getpid()}"
                stack.callback(self._withdraw, rt, case_id, model_url)
                port = self.port or free_port()
                try:
                    self._waiting_case(rt, case_id, target_url)
                    web = self._gunicorn(port)
                    stack.callback(self._stop, web)
                    base = f"http://127.0.0.1:{port}"
                    self._wait_http(f"{base}/review/login/", web, self.workdir / "gunicorn.log", port)
                except (RuntimeError, TimeoutError) as exc:
                    self.say(f"FAILED: {exc}")
                    return 1
                username, password = demo_login()
                self.say(f"\nServing on {base}")
                self.say(f"  review UI:  {base}/review/   (the approval queue; {case_id} waits there)")
                self.say(f"  admin:      {base}/admin/")
                self.say(f"  login:      {username} / {password}   (created for this demo only)")
                self.say(f"  logs:       {self.workdir}")
                self.say("Press Ctrl-C to stop.")
                deadline = None if self.serve_for is None else time.monotonic() + self.serve_for
                while not stop["now"] and (deadline is None or time.monotonic() < deadline):
                    if web.poll() is not None:
                        self.say(f"FAILED: gunicorn exited with {web.returncode}; see {self.workdir / 'gunicorn.log'}")
                        return 1
                    time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
        self.say("Stopped.")
        return 0

    def _waiting_case(self, rt: Runtime, case_id: str, target_url: str) -> None:
        """Start refund ``case_id`` and wait until it asks for approval.

        Raises:
            RuntimeError, TimeoutError: as ``_wait_for_approval``.
        """
        payment = f"pay_{case_id}"
        http_json("POST", f"{target_url}/admin/payments", {"id": payment, "paid": PAID})
        case = {
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
        rt.start("refund", case_id, case, version=REFUND_VERSION)
        proposal, decision = self._wait_for_approval(rt, case_id)
        self.say(
            f"\nStarted {case_id}: the model proposes {proposal['amount']} cents "
            f"({decision['response']['reasoning']!r}); it waits for approval."
        )

    def _gunicorn(self, port: int) -> subprocess.Popen:
        env = {
            **os.environ,
            "ILR_SERVE_STATIC": "1",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": "interlock_project.settings",
        }
        with open(self.workdir / "gunicorn.log", "ab") as log:  # the child keeps its own copy of the fd
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "interlock_project.wsgi:application",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    "2",
                    "--threads",
                    "4",
                    "--timeout",
                    "60",
                    "--access-logfile",
                    "-",
                ],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    @staticmethod
    def _wait_http(url: str, proc: subprocess.Popen, log: Path, port: int, timeout: float = 30.0) -> None:
        """Wait until ``proc`` (this run's gunicorn) listens on ``port`` (its log says "Listening
        at: http://127.0.0.1:PORT") and ``url`` answers 200.

        Raises:
            RuntimeError: gunicorn exited first. TimeoutError: not within ``timeout`` seconds.
        """
        import http.client

        bound = f"Listening at: http://127.0.0.1:{port} "
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {proc.returncode} before serving {url}; see {log}")
            try:
                if (
                    bound in log.read_text(errors="replace")
                    and http_json("GET", url, timeout=2.0)[0] == 200
                    and proc.poll() is None
                ):
                    return
            except (OSError, http.client.HTTPException):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout} s")
            time.sleep(0.2)

    @staticmethod
    def _stop(proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
