"""The demo itself (issues 3 and 20): `manage.py demo` exits 0 and reports a verified receipt
for each --crash choice it offers, a failed run leaves nothing in the review queue, and
`demo --serve` prints its URL only once its server answers there."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from demo.plan import DEMO_POINTS
from tests.support import ROOT
from tests.support.queries.approvals import ID_OF_APPROVAL_REQUESTS_BY_STATUS, REGCLASS_OF_APPROVAL_REQUESTS
from tests.support.queries.workflows import ID_OF_WORKFLOWS_BY_STATUS_WAITING

ALL_CRASHES = [*DEMO_POINTS, "none"]
# Each demo run takes 10 to 30 s, so the suite runs one of each kind (besides the default
# effect_after_send below): a kill before the approval, a kill in a recovery's resend (two
# crashes), and none. ILR_DEMO_ALL_CRASHES=1 runs every choice the command offers.
CRASHES = ALL_CRASHES if os.environ.get("ILR_DEMO_ALL_CRASHES") else ["claimed", "resolve_after_send", "none"]


def review_queue(rt) -> list[str]:
    """What waits for a person: workflows on the signal "approve", and pending approval requests."""
    conn = rt.connection()
    ids = [r["id"] for r in conn.execute(ID_OF_WORKFLOWS_BY_STATUS_WAITING).fetchall()]
    if conn.execute(REGCLASS_OF_APPROVAL_REQUESTS).fetchone()["t"]:
        ids += [r["id"] for r in conn.execute(ID_OF_APPROVAL_REQUESTS_BY_STATUS)]
    return ids


def demo(env, *args, timeout=300):
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "demo", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_demo_tier1_exit_status(clean_db, tmp_path):
    from tests.support.workers import WorkerProcs

    # The demo runs against this session's test database (ILR_DB_NAME), as a user would run it.
    proc = demo(WorkerProcs(tmp_path).env(), "--tier", "1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: the ledger and the receipt agree" in proc.stdout
    assert "COMMITTED_BY_RETRY" in proc.stdout
    assert "SIGKILLed at kill point effect_after_send" in proc.stdout


@pytest.mark.parametrize("crash", CRASHES)
def test_every_crash_choice_works(clean_db, tmp_path, crash):
    """Six choices once waited 60 s for an approval that never came (a kill before it) or for a
    kill point only a recovery reaches, and exited 1 (issue 20)."""
    from tests.support.workers import WorkerProcs

    proc = demo(WorkerProcs(tmp_path).env(), "--tier", "1", "--crash", crash)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK: the ledger and the receipt agree" in proc.stdout
    if crash != "none":
        assert f"SIGKILLed at kill point {crash} " in proc.stdout, proc.stdout
    if crash.startswith("resolve_"):  # the lead-in crash, then the point, then a third worker
        assert "SIGKILLed at kill point effect_after_send " in proc.stdout and "demo-w3-" in proc.stdout


@pytest.mark.parametrize("crash", ["resolve_after_commit", "resolve_after_send"])
def test_a_crash_point_tier_3_never_reaches_is_refused_before_anything_starts(clean_db, tmp_path, crash):
    from tests.support.workers import WorkerProcs

    started = time.monotonic()
    proc = demo(WorkerProcs(tmp_path).env(), "--tier", "3", "--crash", crash, timeout=120)
    assert proc.returncode == 1 and "tier 3 never resends" in proc.stderr, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "started workflow" not in proc.stdout
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("intruder", ["intruder", "demo-w1"])
def test_demo_names_a_foreign_worker_that_claimed_its_case(rt, workers, tmp_path, intruder):
    """A worker that is not the demo's and serves the refund workflow on the same database
    claims the demo's case first. The demo fails at once and names it: before, it waited 60 s
    and said only that the workflow did not ask for approval (a fresh user's find). "demo-w1"
    is a worker left behind by an earlier demo (killed with kill -9), whose id the demo's own
    first worker had too. The failed run withdraws its case: it ends cancelled, and nothing of
    it is left in the review queue (issue 20)."""
    from tests.support.waits import wait_for

    workers.start(intruder, poll=0.05, concurrency=2)
    wait_for(lambda: "running" in workers.log(intruder), timeout=60, message="the intruder polls")
    started = time.monotonic()
    proc = demo(workers.env(), "--tier", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: workflow case-" in proc.stdout and f"was claimed by worker '{intruder}'" in proc.stdout, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    assert time.monotonic() - started < 60
    case_id = re.search(r"FAILED: workflow (case-\S+)", proc.stdout).group(1)
    assert f"case {case_id} withdrawn: cancelled" in proc.stdout, proc.stdout
    assert rt.describe(case_id)["status"] == "cancelled"
    assert review_queue(rt) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_prints_its_url_once_it_answers_and_withdraws_its_case(rt, tmp_path):
    from tests.support.workers import WorkerProcs

    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "demo", "--serve", "--port", str(port), "--serve-for", "3"],
        cwd=ROOT,
        env=WorkerProcs(tmp_path).env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        out = []
        for line in proc.stdout:
            out.append(line)
            if line.startswith("Serving on "):
                # The moment the URL is printed, this run's server answers there.
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/review/login/", timeout=5) as r:
                    assert r.status == 200
                break
        else:
            raise AssertionError("".join(out))
        rest, _ = proc.communicate(timeout=120)
        out.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    text = "".join(out)
    assert proc.returncode == 0, text
    case_id = re.search(r"Started (case-\S+):", text).group(1)
    assert f"case {case_id} withdrawn: cancelled" in text, text
    assert review_queue(rt) == []


def test_serve_refuses_a_port_another_server_holds(clean_db, tmp_path):
    from tests.support.workers import WorkerProcs

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "demo", "--serve", "--port", str(port), "--serve-for", "1"],
            cwd=ROOT,
            env=WorkerProcs(tmp_path).env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"port {port} on 127.0.0.1 is in use" in proc.stdout and "Serving on" not in proc.stdout, proc.stdout


def test_demo_agent_prints_the_conversation_the_approval_the_ledger_and_the_receipt(clean_db, tmp_path):
    """`demo --agent`: the support agent's ticket, lookup and gated call, approved as
    --approve-as, a SIGKILL after the target answered, one send, the answer (issue 21)."""
    from tests.support.workers import WorkerProcs

    proc = demo(WorkerProcs(tmp_path).env(), "--agent", "--tier", "1", "--approve-as", "agent-reviewer")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    # The conversation: the ticket, each turn's text and tool calls with their arguments, each result.
    conversation = out[out.index("\nConversation") : out.index("\nAnswer to the customer")]
    payment = re.search(r"payment (pay_ticket-\S+),", out).group(1)
    assert "user (the ticket):" in conversation and "the item arrived damaged" in conversation
    assert f'tool_use lookup_payment {{"payment": "{payment}"}}' in conversation
    assert '"eligible": true' in conversation and '"refunded_by_others": 0' in conversation
    assert f'tool_use issue_refund {{"amount": 2000, "payment": "{payment}"}}' in conversation
    assert "tool_result for issue_refund: " in conversation and "COMMITTED_BY_RETRY" in conversation
    assert conversation.count("(model):") == 3
    assert "SIGKILLed at kill point effect_after_send" in out
    assert "the transcript replays identically" in out
    # The approval: the request, the approver and the grant the send went under.
    approval = re.search(r"request (apr_\w+): approved by agent-reviewer; grant (grant_\w+)", out)
    assert approval, out
    assert f"sent under grant {approval.group(2)}" in out
    # One ledger row, and the receipt's answers.
    ledger = out[out.index("\nLedger") : out.index("\nEffectResult")]
    assert len(re.findall(r"^  refund re_\w+: 2000 cents", ledger, re.MULTILINE)) == 1, ledger
    assert "EffectResult: COMMITTED_BY_RETRY" in out
    for answer in ("valid", "tamper_evident", "happened", "happened_once", "authorized_when_fired", "assumptions_held"):
        assert re.search(rf"^  {answer} +True$", out, re.MULTILINE), (answer, out)
    assert "OK: the conversation replays, and the approval, the ledger and the receipt agree." in out


def test_demo_agent_in_pydantic_ai_replays_and_sends_once(clean_db, tmp_path):
    """`demo --agent --framework pydantic-ai`: the same case written in Pydantic AI (issue 45):
    its conversation, the approval of the exact arguments, a SIGKILL after the target answered,
    one refund, and a receipt that verifies; an unknown framework is named."""
    from tests.support.workers import WorkerProcs

    env = WorkerProcs(tmp_path).env()
    proc = demo(env, "--agent", "--framework", "pydantic-ai", "--approve-as", "agent-reviewer")
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "Pydantic AI" in out.splitlines()[0]
    conversation = out[out.index("\nConversation") : out.index("\nAnswer to the customer")]
    payment = re.search(r"payment (pay_ticket-\S+),", out).group(1)
    assert f'tool call issue_refund {{"amount": 2000, "payment": "{payment}"}}' in conversation
    assert "tool-return for issue_refund: " in conversation and "COMMITTED_BY_RETRY" in conversation
    assert conversation.count("(model):") == 3
    assert "SIGKILLed at kill point effect_after_send" in out
    assert "the transcript replays identically" in out and "model calls made 3, recorded 3" in out
    ledger = out[out.index("\nLedger") : out.index("\nEffectResult")]
    assert len(re.findall(r"^  refund re_\w+: 2000 cents", ledger, re.MULTILINE)) == 1, ledger
    assert "OK: the conversation replays, and the approval, the ledger and the receipt agree." in out
    bad = demo(env, "--agent", "--framework", "langchain", timeout=60)
    assert bad.returncode != 0 and "unknown framework 'langchain'" in bad.stderr, bad.stdout + bad.stderr
