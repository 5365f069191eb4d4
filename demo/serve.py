"""``manage.py demo --serve``: the admin and the review UI under gunicorn, with a refund left
waiting for approval (the payment target, the model stub and two workers as in the demo)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.management import call_command

from demo.peers.targets_client import http_json
from demo.refund import ROOT, Demo
from demo.workflows import REFUND_VERSION
from ilr import Runtime
from ilr._journal import keys

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
        from demo.peers.model_stub import model_stub_process
        from demo.peers.target import target_process

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

    def _waiting_case(self, rt: Runtime, case_id: str, target_url: str) -> None:
        """Start refund ``case_id`` and wait until it asks for approval.

        Raises:
            RuntimeError, TimeoutError: as ``_wait_for_approval``.
        """
        case = self._new_case(case_id, target_url)
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
