"""The refund demo (the README's main job): a model decides, a person approves, a worker is
SIGKILLed at a crash point, another recovers, and the ledger and the receipt are checked.

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

from ilr import Runtime, keys, receipts
from ilr.killpoints import POINTS
from prove.targets_client import http_json

ROOT = Path(__file__).resolve().parent.parent
LEASE_TTL, SEND_TIMEOUT, SETTLE_MARGIN = 5.0, 3.0, 5.0  # the harness timeouts (spec §11.1)
PAID = 10_000


@dataclass
class Expectation:
    status: set[str]
    refunds: int
    happened: object


def expected(tier: int, crash: str | None) -> Expectation:
    """What the ledger and the receipt must show for a tier and crash point (spec §11.3)."""
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

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def run(self) -> int:
        """Run the demo; return the exit status (0 when ledger and receipt match expectations)."""
        if self.crash not in (None, "none") and self.crash not in POINTS:
            raise ValueError(f"--crash: {self.crash!r} is not a kill point ({', '.join(POINTS)})")
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.say(f"Interlock refund demo: tier {self.tier}, crash at {self.crash or 'none'}")
        self.say(f"  database: {'DATABASE_URL' if os.environ.get('DATABASE_URL') else 'embedded PostgreSQL 18 at ' + str(settings.DATA_DIR / 'pg')}")
        call_command("migrate", verbosity=0)
        if keys.key_path() is None:
            private, _ = keys.generate()
            self.say(f"  signing key: generated {private} (Ed25519, mode 0600)")
        from prove.model_stub import model_stub_process
        from prove.target import target_process

        with contextlib.ExitStack() as stack:
            stack.callback(self._stop_workers)
            target_url = stack.enter_context(target_process(
                tier=self.tier, queryable=self.tier == 1, ledger=self.workdir / "ledger.sqlite"))
            model_url = stack.enter_context(model_stub_process())
            self.say(f"  payment target: {target_url} (tier {self.tier}); model stub: {model_url} (EMULATED model)")
            return self._scenario(target_url, model_url, started)

    def _worker(self, worker_id: str, model_url: str, kill_at: str | None) -> subprocess.Popen:
        self.worker_ids.add(worker_id)
        env = {**os.environ, "ILR_MODEL_BASE_URL": model_url, "PYTHONUNBUFFERED": "1"}
        env.pop("ILR_KILL_AT", None)
        if kill_at:
            env["ILR_KILL_AT"] = kill_at
        log = open(self.workdir / f"{worker_id}.log", "ab")
        proc = subprocess.Popen([sys.executable, str(ROOT / "manage.py"), "ilr_worker", "--id", worker_id,
                                 "--lease-ttl", str(LEASE_TTL), "--poll", "0.5", "--concurrency", "2"],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(proc)
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
        case = {"id": case_id, "payment": payment, "paid": PAID, "reason": "package arrived damaged",
                "verify_after": 0, "target": {"url": target_url, "tier": self.tier, "queryable": self.tier == 1,
                                              "send_timeout": SEND_TIMEOUT, "settle_margin": SETTLE_MARGIN}}
        w1_id, w2_id = self._worker_id("w1"), self._worker_id("w2")
        w1 = self._worker(w1_id, model_url, self.crash if self.crash not in (None, "none") else None)
        rt.start("refund", case_id, case)
        self.say(f"\n1. started workflow {case_id} (payment {payment}, paid ${PAID / 100:.2f})")
        try:
            proposal, decision = self._wait_for_approval(rt, case_id)
            self.say(f"2. the model decided {proposal['amount']} cents: {decision['response']['reasoning']!r}")
            self.say(f"   premises it rested on: {decision['premises']}")
            grant_id = rt.approve(case_id, proposal, decision["premises"], by=self.approve_as)
            self.say(f"3. {self.approve_as} approved exactly {proposal} as grant {grant_id}")
            if self.crash not in (None, "none"):
                self._wait_for_exit(rt, case_id, w1, w1_id, timeout=60)
                self.say(f"4. worker {w1_id} was SIGKILLed at kill point {self.crash} "
                         f"(exit {w1.returncode}); starting {w2_id} to recover")
                self._worker(w2_id, model_url, None)
        except (RuntimeError, TimeoutError) as exc:
            self.say(f"\nFAILED: {exc}")
            return 1
        try:
            result = self._result(rt, case_id, timeout=90)
        except RuntimeError as exc:  # a foreign claim
            self.say(f"\nFAILED: {exc}")
            return 1
        except Exception as exc:  # noqa: BLE001 - reported, and the exit status says so
            self.say(f"\nFAILED: the workflow did not complete: {exc}")
            return 1
        return self._report(rt, case_id, payment, target_url, result, proposal, started)

    @staticmethod
    def _worker_id(name: str) -> str:
        # This run's own: a worker left behind by an earlier demo (killed with kill -9) has
        # another id, so a claim of its counts as a foreign one (_check_claims).
        return f"demo-{name}-{os.getpid()}"

    def _wait_for_exit(self, rt: Runtime, case_id: str, proc: subprocess.Popen, worker_id: str,
                       timeout: float) -> None:
        """Wait for the worker that carries the kill point to die there, watching for a foreign
        claim (``_check_claims``) meanwhile.

        Raises:
            RuntimeError: a foreign claim.
            TimeoutError: the worker still runs after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            self._check_claims(rt, case_id)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"worker {worker_id} did not reach kill point "
                                   f"{self.crash} within {timeout:.0f} s")
            time.sleep(0.1)

    def _check_claims(self, rt: Runtime, case_id: str) -> None:
        """Raise when a worker that is not the demo's claimed the demo's workflow.

        The demo shares the database's work queue: a worker of the user's own that serves the
        refund workflow on the same database can claim the case first. It has not the demo's
        model stub, target or kill point, so the demo would wait for something that never
        comes. Every claim is in ilr.claims with its owner.

        Raises:
            RuntimeError: naming the other worker and what to do.
        """
        row = rt.connection().execute(
            "select owner from ilr.claims where workflow_id = %s and owner <> all(%s) order by epoch limit 1",
            (case_id, sorted(self.worker_ids))).fetchone()
        if row is not None:
            raise RuntimeError(
                f"workflow {case_id} was claimed by worker {row['owner']!r}, not by the demo's workers "
                f"({', '.join(sorted(self.worker_ids))}): another worker serving the refund workflow polls this "
                "database. Stop it, or give the demo an embedded PostgreSQL of its own "
                "(ILR_DATA_DIR=.data/demo-only python manage.py demo)")

    def _result(self, rt: Runtime, case_id: str, timeout: float) -> dict:
        """rt.result, watching for a foreign claim (``_check_claims``) once a second."""
        deadline = time.monotonic() + timeout
        while True:
            self._check_claims(rt, case_id)
            try:
                result = rt.result(case_id, timeout=min(1.0, max(0.0, deadline - time.monotonic())))
            except TimeoutError:
                if time.monotonic() >= deadline:
                    raise
                continue
            self._check_claims(rt, case_id)  # a foreign worker may have finished it
            return result

    def _wait_for_approval(self, rt: Runtime, case_id: str) -> tuple[dict, dict]:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            self._check_claims(rt, case_id)
            d = rt.describe(case_id)
            if d["status"] in ("failed", "stuck"):
                raise RuntimeError(f"workflow {case_id} ended {d['status']}: {d['error']}")
            if d["status"] == "sleeping" and (d["waiting"] or {}).get("signal") == "approve":
                steps = {s["name"]: s for s in d["steps"]}
                return steps["propose"]["output"], steps["pick_amount"]["output"]
            time.sleep(0.1)
        raise TimeoutError(f"workflow {case_id} did not ask for approval within 60 s")

    def _report(self, rt, case_id, payment, target_url, result, proposal, started) -> int:
        expect = expected(self.tier, self.crash)
        d = rt.describe(case_id)
        conn = rt.connection()
        t0 = d["created_at"]
        self.say("\nTimeline (database clock, seconds since start)")
        events = [(c["claimed_at"], f"claim epoch {c['epoch']} by {c['owner']}"
                   + (" (takeover after lease expiry)" if c["prev_status"] == "running" else ""))
                  for c in conn.execute("select * from ilr.claims where workflow_id = %s", (case_id,)).fetchall()]
        events += [(s["created_at"], f"step {s['seq']} {s['kind']} {s['name']}"
                    + (f" -> {s['output']['status']}" if s["kind"] == "effect" else ""))
                   for s in d["steps"]]
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
        v = receipts.verify(bundle)
        self.say(f"\nEffectResult: {result['status']} ({result['effect_id']})")
        self.say("Receipt verify():")
        for k in ("valid", "tamper_evident", "happened", "happened_once", "authorized_when_fired",
                  "assumptions_held", "sends"):
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
        once_ok = v["happened_once"] is True or (v["happened_once"] == "unknown"
                                                 and result["status"] == "REAPPLIED_AFTER_QUERY")
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
        content_type__app_label="ilr", codename__startswith="view_")
    user.user_permissions.set(perms)
    return username, password


@dataclass
class ServeDemo(Demo):
    """``demo --serve``: the target, the model stub and two workers as in the demo, one refund left
    waiting for approval, and gunicorn serving the admin and the review UI until interrupted."""

    port: int = 8000
    serve_for: float | None = None

    def serve(self) -> int:
        """Run until Ctrl-C, SIGTERM or ``serve_for`` seconds; return the exit status."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.say(f"Interlock approvals demo: the admin and the review UI under gunicorn (tier {self.tier})")
        where = ("DATABASE_URL" if os.environ.get("DATABASE_URL")
                 else f"embedded PostgreSQL 18 at {settings.DATA_DIR / 'pg'}")
        self.say(f"  database: {where}")
        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        if keys.key_path() is None:
            private, _ = keys.generate()
            self.say(f"  signing key: generated {private} (Ed25519, mode 0600)")
        from prove.model_stub import model_stub_process
        from prove.target import target_process

        stop = {"now": False}
        previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
        try:
            with contextlib.ExitStack() as stack:
                stack.callback(self._stop_workers)
                target_url = stack.enter_context(target_process(
                    tier=self.tier, queryable=self.tier == 1, ledger=self.workdir / "ledger.sqlite"))
                model_url = stack.enter_context(model_stub_process())
                self.say(f"  payment target: {target_url} (tier {self.tier}); model stub: {model_url} (EMULATED model)")
                for name in ("w1", "w2"):
                    self._worker(self._worker_id(name), model_url, None)
                try:
                    case_id = self._waiting_case(target_url)
                except (RuntimeError, TimeoutError) as exc:
                    self.say(f"FAILED: {exc}")
                    return 1
                port = self.port or free_port()
                web = self._gunicorn(port)
                stack.callback(self._stop, web)
                base = f"http://127.0.0.1:{port}"
                self._wait_http(f"{base}/review/login/", web)
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
                        self.say(f"FAILED: gunicorn exited with {web.returncode}; "
                                 f"see {self.workdir / 'gunicorn.log'}")
                        return 1
                    time.sleep(0.2)
        except KeyboardInterrupt:
            pass
        finally:
            signal.signal(signal.SIGTERM, previous)
        self.say("Stopped.")
        return 0

    def _waiting_case(self, target_url: str) -> str:
        rt = Runtime()
        try:
            case_id = f"case-{time.strftime('%H%M%S')}-{os.getpid()}"
            payment = f"pay_{case_id}"
            http_json("POST", f"{target_url}/admin/payments", {"id": payment, "paid": PAID})
            case = {"id": case_id, "payment": payment, "paid": PAID, "reason": "package arrived damaged",
                    "verify_after": 0, "target": {"url": target_url, "tier": self.tier, "queryable": self.tier == 1,
                                                  "send_timeout": SEND_TIMEOUT, "settle_margin": SETTLE_MARGIN}}
            rt.start("refund", case_id, case)
            proposal, decision = self._wait_for_approval(rt, case_id)
            self.say(f"\nStarted {case_id}: the model proposes {proposal['amount']} cents "
                     f"({decision['response']['reasoning']!r}); it waits for approval.")
            return case_id
        finally:
            rt.close()

    def _gunicorn(self, port: int) -> subprocess.Popen:
        env = {**os.environ, "ILR_SERVE_STATIC": "1", "PYTHONUNBUFFERED": "1",
               "DJANGO_SETTINGS_MODULE": "interlock_project.settings"}
        with open(self.workdir / "gunicorn.log", "ab") as log:  # the child keeps its own copy of the fd
            return subprocess.Popen([sys.executable, "-m", "gunicorn", "interlock_project.wsgi:application",
                                     "--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "4",
                                     "--timeout", "60", "--access-logfile", "-"],
                                    cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)

    @staticmethod
    def _wait_http(url: str, proc: subprocess.Popen, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {proc.returncode} before serving {url}")
            try:
                if http_json("GET", url, timeout=2.0)[0] == 200:
                    return
            except OSError:
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
