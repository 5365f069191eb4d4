"""Resuming a stuck workflow (made stuck with plain SQL, as the crash-loop guard leaves one): the
``ilr_resume`` command; the admin action (confirmation page, LogEntry) through Django's test
client; and every refusal. Resuming after a real crash loop is in tests/faults/test_resume.py."""

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
from tests.support.db import status
from tests.support.queries.steps import SEED_STEPS_STEP1
from tests.support.queries.workflows import (
    SET_WORKFLOWS_COMPLETED_PEND,
    SET_WORKFLOWS_STATUS_EPOCH_TAKEOVERS_BY_ID,
)


def make_stuck(rt, wf_id, error=None):
    """A three_steps workflow stuck after its first step, as the crash-loop guard leaves one."""
    import tests.support.flows  # noqa: F401 - three_steps registered and deployed by its first start

    rt.start("three_steps", wf_id, {})
    error = error or {
        "type": "CrashLoop",
        "message": "crash loop: 6 takeovers since the last recorded step (max_takeovers 5)",
    }
    rt.connection().execute(
        SEED_STEPS_STEP1,
        (wf_id,),
    )
    rt.connection().execute(
        SET_WORKFLOWS_STATUS_EPOCH_TAKEOVERS_BY_ID,
        (json.dumps(error), wf_id),
    )


def test_resume_refuses_what_is_not_stuck_and_changes_nothing(rt):
    import tests.support.flows  # noqa: F401

    rt.start("three_steps", "pend", {})
    before = rt.describe("pend")
    with pytest.raises(InvalidInput) as err:
        rt.resume("pend", by="ops")
    assert err.value.field == "workflow_id" and "only a stuck workflow resumes" in err.value.rule
    assert "is pending" in err.value.rule
    rt.connection().execute(SET_WORKFLOWS_COMPLETED_PEND)
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
