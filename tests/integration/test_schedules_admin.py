"""The schedule admin through Django's test client (issue 44): the form refuses bad input on its
field and writes nothing, creates and edits with a LogEntry; pause, resume, trigger and backfill
behind ilr.change_schedule and a confirmation page; the list and the detail page."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse

from tests.support.review import client_for, text, user

pytestmark = pytest.mark.usefixtures("transactional_db")

FORM = {
    "schedule_id": "nightly",
    "workflow_name": "sched_note",
    "input": "{}",
    "cron": "30 2 * * *",
    "timezone": "Europe/Berlin",
    "jitter": "0",
    "overlap": "skip",
    "catchup_window": "60",
}


def ops(*perms):
    return client_for(user("ops", "ilr.view_schedule", "ilr.view_workflow", *perms, staff=True))


def test_the_form_refuses_bad_input_on_its_field_then_creates_with_a_log_entry(rt):
    c = ops("ilr.change_schedule")
    url = reverse("admin:ilr_schedule_add_form")
    r = c.post(url, {**FORM, "cron": "99 * * * *"})
    assert r.status_code == 200 and "got &#x27;99 * * * *&#x27;" in text(r)
    assert r.context["form"].errors.get("cron")
    r = c.post(url, {**FORM, "timezone": "Nowhere/Else"})
    assert r.context["form"].errors.get("timezone")
    r = c.post(url, {**FORM, "cron": "0 0 31 2 *"})  # never fires: was a 500 (CroniterBadDateError)
    assert r.status_code == 200 and r.context["form"].errors.get("cron")
    r = c.post(url, {**FORM, "cron": "", "every": "1e20"})  # was a 500 (OverflowError)
    assert r.status_code == 200 and r.context["form"].errors.get("every")
    assert rt.schedules() == []
    r = c.post(url, FORM)
    assert r.status_code == 302
    assert rt.describe_schedule("nightly")["cron"] == "30 2 * * *"
    assert LogEntry.objects.filter(object_id="nightly", change_message__startswith="Created").count() == 1
    r = c.post(reverse("admin:ilr_schedule_edit", args=["nightly"]), {**FORM, "overlap": "buffer_one"})
    assert r.status_code == 302 and rt.describe_schedule("nightly")["overlap"] == "buffer_one"
    list_page = text(c.get(reverse("admin:ilr_schedule_changelist")))
    assert "nightly" in list_page and "30 2 * * * (Europe/Berlin)" in list_page
    detail = text(c.get(reverse("admin:ilr_schedule_change", args=["nightly"])))
    assert "next ticks" in detail.lower() and "Edit this schedule" in detail and "Missed and skipped" in detail
    assert "Ticks pruned through" in detail  # ILR_SCHEDULE_TICK_RETENTION's mark (none yet)


def test_pause_resume_trigger_and_backfill_confirm_first_and_log(rt):
    rt.schedule("s1", "sched_note", {}, every=3600, overlap="allow_all")
    c = ops("ilr.change_schedule")
    url = reverse("admin:ilr_schedule_pause") + "?ids=s1"
    r = c.get(url)
    assert r.status_code == 200 and "Yes, pause 1 schedule" in text(r)
    assert not rt.describe_schedule("s1")["paused"]  # the GET changed nothing
    r = c.post(reverse("admin:ilr_schedule_pause"), {"ids": ["s1"], "confirm": "yes"}, follow=True)
    # The admin capitalizes a message's first letter: the id (case-sensitive) must not come first.
    assert [str(m) for m in r.context["messages"]] == ["Schedule s1: paused"]
    d = rt.describe_schedule("s1")
    assert d["paused"] and d["note"] == "paused in the admin (by ops)"
    c.post(reverse("admin:ilr_schedule_resume"), {"ids": ["s1"], "confirm": "yes"})
    assert not rt.describe_schedule("s1")["paused"]
    c.post(reverse("admin:ilr_schedule_trigger"), {"ids": ["s1"], "confirm": "yes"})
    assert len(rt.describe_schedule("s1")["recent"]) == 1
    form = {"ids": ["s1"], "confirm": "yes", "start": "2026-01-01 00:00:00", "end": "2026-01-01 03:00:00"}
    c.post(reverse("admin:ilr_schedule_backfill"), form)
    assert len(rt.describe_schedule("s1")["recent"]) == 4
    messages = list(LogEntry.objects.filter(object_id="s1").values_list("change_message", flat=True))
    assert any(m.startswith("Paused") for m in messages) and any(m.startswith("Backfilled") for m in messages)
    assert any(m.startswith("Resumed") for m in messages) and any(m.startswith("Triggered") for m in messages)


def test_without_the_permission_every_write_is_refused(rt):
    rt.schedule("s1", "sched_note", {}, every=3600)
    c = ops()
    assert c.get(reverse("admin:ilr_schedule_add_form")).status_code == 403
    assert c.post(reverse("admin:ilr_schedule_pause"), {"ids": ["s1"], "confirm": "yes"}).status_code == 403
    assert not rt.describe_schedule("s1")["paused"]
    assert c.get(reverse("admin:ilr_schedule_changelist")).status_code == 200
