"""Resuming a stuck workflow: driven stuck for real (a swallowed Suspend, a crash loop of real
SIGKILLs), resumed through the API, and completed once the code is fixed or the fault removed;
the ``ilr_resume`` command; the admin action (confirmation page, LogEntry) through Django's
test client; and every refusal."""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from ilr import InvalidInput, WorkflowNotFound
from tests.support.db import invocations
from tests.support.waits import wait_for


def status(rt, wf_id):
    return rt.describe(wf_id)["status"]


def make_stuck(rt, wf_id, error=None):
    """A three_steps workflow stuck after its first step, as the crash-loop guard leaves one."""
    import tests.support.flows  # noqa: F401 - three_steps registered and deployed by its first start

    rt.start("three_steps", wf_id, {})
    error = error or {
        "type": "CrashLoop",
        "message": "crash loop: 6 takeovers since the last recorded step (max_takeovers 5)",
    }
    rt.connection().execute(
        "insert into ilr.steps (workflow_id, seq, name, kind, output, epoch) values (%s, 1, 'step1', 'step', '1', 1)",
        (wf_id,),
    )
    rt.connection().execute(
        "update ilr.workflows set status = 'stuck', epoch = 7, takeovers = 6, error = %s::jsonb where id = %s",
        (json.dumps(error), wf_id),
    )


def test_swallowed_suspend_resumed_under_fixed_code_completes_keeping_its_steps(rt, workers):
    """A workflow whose sleep sits in a bare except is marked stuck ("Suspend swallowed"); after
    rt.resume it runs under a worker with the fixed code: the recorded step is replayed (its body
    ran once), the sleep and the rest run, and the workflow completes."""
    workers.start("broken")
    rt.start("swallow_unless_fixed", "sw", {})
    wait_for(lambda: status(rt, "sw") == "stuck", message="the swallowed Suspend marks it stuck")
    stuck = rt.describe("sw")
    assert stuck["error"]["type"] == "SuspendSwallowed"
    assert [s["name"] for s in stuck["steps"]] == ["before"]
    assert invocations(rt, "sw", "after") == 1
    workers.kill("broken")

    out = rt.resume("sw", by="ops")
    assert out["workflow_id"] == "sw" and out["status"] == "pending" and out["steps"] == 1
    assert out["error"]["type"] == "SuspendSwallowed" and out["resumed_by"] == "ops"
    row = rt.describe("sw")
    assert (row["status"], row["error"], row["takeovers"], row["epoch"]) == ("pending", None, 0, stuck["epoch"])
    assert row["resumed_by"] == "ops" and row["resumed_at"] == out["resumed_at"]

    workers.start("fixed", env={"ILR_TEST_FIXED": "1"})
    assert rt.result("sw", timeout=30) == "fixed"
    assert invocations(rt, "sw", "before") == 1  # kept: replayed from its row, never run again
    # "after" never recorded in the broken run (its body ran once after the swallowed Suspend,
    # and its record was refused): a step without a row runs again, exactly once more here.
    assert invocations(rt, "sw", "after") == 2
    assert [s["name"] for s in rt.describe("sw")["steps"]] == ["before", "sleep", "after"]


def test_crash_loop_resumed_after_the_fault_is_removed_completes(rt, workers):
    """Every claim is SIGKILLed before it records step1 until the crash-loop guard marks the
    workflow stuck; resumed, with the fault gone, it completes, and the guard starts over."""
    rt.start("three_steps", "loop", {})
    for i in range(6):
        proc = workers.start(
            f"k{i}", lease_ttl=1, args=("--max-takeovers", "1"), env={"ILR_KILL_AT": "step_before_record"}
        )
        wait_for(
            lambda proc=proc: proc.poll() is not None or status(rt, "loop") == "stuck",
            timeout=20,
            message="the worker dies at the kill point, or the guard marks the workflow stuck",
        )
        if status(rt, "loop") == "stuck":
            break
    d = rt.describe("loop")
    assert d["status"] == "stuck" and d["error"]["type"] == "CrashLoop", d
    assert invocations(rt, "loop", "step1") == 2  # the first claim and one takeover
    workers.kill_all()  # the worker that marked it stuck still has the kill point armed

    out = rt.resume("loop", by="ops")
    assert out["error"]["type"] == "CrashLoop" and out["steps"] == 0
    assert rt.describe("loop")["takeovers"] == 0
    workers.start("healthy", lease_ttl=1, args=("--max-takeovers", "1"))
    assert rt.result("loop", timeout=30) == {"counts": [3, 1, 1]}  # step1 ran again: it never recorded


def test_resume_refuses_what_is_not_stuck_and_changes_nothing(rt):
    import tests.support.flows  # noqa: F401

    rt.start("three_steps", "pend", {})
    before = rt.describe("pend")
    with pytest.raises(InvalidInput) as err:
        rt.resume("pend", by="ops")
    assert err.value.field == "workflow_id" and "only a stuck workflow resumes" in err.value.rule
    assert "is pending" in err.value.rule
    rt.connection().execute("update ilr.workflows set status = 'completed' where id = 'pend'")
    with pytest.raises(InvalidInput, match="is completed: only a stuck workflow resumes"):
        rt.resume("pend", by="ops")
    after = rt.describe("pend")
    assert after["resumed_by"] is None and after["resumed_at"] is None and after["epoch"] == before["epoch"]
    make_stuck(rt, "st")
    for bad in (None, "", 7):
        with pytest.raises(InvalidInput) as err:
            rt.resume("st", by=bad)
        assert err.value.field == "by"
    with pytest.raises(WorkflowNotFound):
        rt.resume("nope", by="ops")
    with pytest.raises(InvalidInput) as err:
        rt.migrate("st", "1")  # its own version: would leave it stuck
    assert err.value.field == "to_version" and "rt.resume" in err.value.rule
    assert status(rt, "st") == "stuck"


def test_ilr_resume_command(rt):
    make_stuck(rt, "cmd")
    out = io.StringIO()
    call_command("ilr_resume", "cmd", "--by", "oncall", stdout=out)
    answer = json.loads(out.getvalue())
    assert answer["status"] == "pending" and answer["resumed_by"] == "oncall" and answer["steps"] == 1
    assert answer["error"]["type"] == "CrashLoop"
    d = rt.describe("cmd")
    assert (d["status"], d["takeovers"], d["error"], d["resumed_by"]) == ("pending", 0, None, "oncall")
    assert [s["name"] for s in d["steps"]] == ["step1"]
    with pytest.raises(CommandError, match="is pending: only a stuck workflow resumes"):
        call_command("ilr_resume", "cmd", "--by", "oncall", stdout=io.StringIO())
    with pytest.raises(CommandError, match="nope"):
        call_command("ilr_resume", "nope", "--by", "oncall", stdout=io.StringIO())


@pytest.mark.usefixtures("transactional_db")
def test_admin_resume_action_confirms_then_resumes_with_a_log_entry(rt):
    make_stuck(rt, "adm")
    rt.start("three_steps", "fine", {})
    staff = User.objects.create_user("viewer", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_workflow", content_type__app_label="ilr"))
    c = Client()
    c.force_login(staff)
    assert c.get(reverse("admin:ilr_workflow_resume"), {"ids": "adm"}).status_code == 403

    boss = User.objects.create_superuser("boss", password="pw")
    c = Client()
    c.force_login(boss)
    changelist = reverse("admin:ilr_workflow_changelist")
    r = c.post(changelist, {"action": "resume_selected", "_selected_action": ["adm", "fine"]})
    assert r.status_code == 302 and r["Location"].startswith(reverse("admin:ilr_workflow_resume"))
    page = c.get(r["Location"])
    body = page.content.decode()
    assert page.status_code == 200 and "Yes, resume 1 workflow" in body
    assert "crash loop: 6 takeovers" in body and "not stuck: left alone" in body
    # The selection travels in the POST (hidden ids), not in the URL.
    assert body.count('name="ids" value="adm"') == 1 and body.count('name="ids" value="fine"') == 1
    assert status(rt, "adm") == "stuck" and LogEntry.objects.count() == 0  # the page wrote nothing

    r = c.post(reverse("admin:ilr_workflow_resume"), {"ids": ["adm", "fine"], "confirm": "yes"})
    assert r.status_code == 302
    d = rt.describe("adm")
    assert (d["status"], d["takeovers"], d["error"], d["resumed_by"]) == ("pending", 0, None, "boss")
    entries = list(LogEntry.objects.all())
    assert len(entries) == 1 and entries[0].object_id == "adm" and entries[0].user_id == boss.pk
    assert "Resumed from stuck (CrashLoop" in entries[0].change_message
    assert "Kept 1 recorded step" in entries[0].change_message
    assert status(rt, "fine") == "pending" and rt.describe("fine")["resumed_by"] is None
    follow = c.get(changelist)
    assert "Resumed adm" in follow.content.decode() and "Nothing to do for fine: not stuck" in follow.content.decode()
    # A second confirmation of the same (now pending) workflow changes nothing and logs nothing.
    c.post(reverse("admin:ilr_workflow_resume"), {"ids": ["adm"], "confirm": "yes"})
    assert LogEntry.objects.count() == 1
    assert c.get(reverse("admin:ilr_workflow_resume"), {"ids": "nope"}).status_code == 404
