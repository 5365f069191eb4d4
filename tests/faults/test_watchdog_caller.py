"""The runtime never ends its caller's process (issue 39): an orphan sweep called from a web
process (``rt.recover_orphans``: an admin action, a view) whose send outlives its local deadline
ends that send as an unknown outcome, writes nothing, and leaves the effect for recovery. Only
``ilr_worker`` opts in to the watchdog's process exit (docs/protocol.md §6.3).

Real PostgreSQL, real worker subprocesses, the real HTTP target holding the resend (its
blackhole), and a Python subprocess that stands for the web process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from demo.workflows import target_for
from ilr._effects.orphans import find_orphans, recover_orphans
from ilr._journal import journal
from tests.support import ROOT
from tests.support.refund_harness import cancelled_orphan, refund_env
from tests.support.waits import wait_for

WEB_PROCESS = textwrap.dedent(
    """
    import json, os, sys
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "interlock_project.settings")
    import django
    django.setup()
    from ilr._effects.orphans import recover_orphans
    from demo.workflows import target_for

    class NoSocketTimeout:
        # A target whose apply() takes no timeout: its socket gives up 2 s past the send's
        # deadline, so the watchdog fires first.
        def __init__(self, inner):
            self._inner = inner
        def __getattr__(self, name):
            return getattr(self._inner, name)
        def apply(self, effect_id, payload):
            return self._inner.apply(effect_id, payload, timeout=self._inner.send_timeout + 2)

    dsn, case = sys.argv[1], json.loads(sys.argv[2])
    target = NoSocketTimeout(target_for(case))
    report = recover_orphans(dsn, {target.name: target}, lease_ttl=10.0)
    print("REPORT " + json.dumps(report), flush=True)
    """
)


def test_an_overrun_send_in_a_web_process_ends_only_that_send(rt, workers, tmp_path, test_dsn):
    with refund_env(tmp_path, 1, queryable=False) as env:
        case, orphan = cancelled_orphan(rt, workers, env, "web-overrun")
        workers.kill_all()  # only the "web process" acts on the orphan from here on
        env.admin("blackhole", {"on": True})  # the resend is read and never answered
        web = subprocess.run(
            [sys.executable, "-c", WEB_PROCESS, test_dsn, json.dumps(case)],
            cwd=ROOT,
            env=workers.env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert web.returncode == 0, (web.returncode, web.stdout, web.stderr)
        assert "outlived its" in web.stderr and "interrupting it (unknown outcome)" in web.stderr, web.stderr
        assert "exiting" not in web.stderr, web.stderr
        report = json.loads(web.stdout.split("REPORT ", 1)[1])
        assert report == [
            {"effect_id": orphan["effect_id"], "workflow_id": case["id"], "outcome": "not settled yet"}
        ], report
        # Nothing written for the overrun send: the effect is dispatched, left for recovery.
        eff = rt.describe(case["id"])["effects"][0]
        assert eff["state"] == "dispatched", eff
        kinds = [e["kind"] for e in journal.parsed(rt.connection(), orphan["effect_id"])]
        assert kinds.count("COMMITTED") == 0, kinds
        # Recovery resolves it later, with one application at the target.
        env.admin("blackhole", {"on": False})
        plain = target_for(case)

        def resolved():
            rows = [r for r in find_orphans(rt.connection()) if r["dispatch_workflow_id"] == case["id"]]
            if rows and rows[0]["settled"]:
                return recover_orphans(test_dsn, {plain.name: plain})
            return None if rows else [{"outcome": "resolved meanwhile"}]

        out = wait_for(resolved, timeout=60, message="the orphan settled and recovered")
        assert out[0]["outcome"].startswith("COMMITTED"), out
        assert len([r for r in env.ledger(case["payment"]) if r["source"] == "api"]) == 1
