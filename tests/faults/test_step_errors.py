"""A step that keeps raising shows its last error (issue 20): in ``describe()``, the worker's
log, the admin's workflow page and the review UI's case page. Real PostgreSQL, a real worker
subprocess."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.support.waits import failing, wait_for


@pytest.mark.usefixtures("transactional_db")
def test_a_failing_step_shows_its_last_error_everywhere(rt, workers):
    workers.start("w1")
    rt.start("always_fails", "af-1", {"message": "boom"})
    d = failing(rt, "af-1", 2)
    err = d["last_error"]
    assert err["type"] == "ValueError" and err["message"] == "boom" and err["attempt"] >= 2, err
    assert dt.datetime.fromisoformat(err["at"]).tzinfo is not None, err
    # Durable, where the retry is scheduled: the waiting state names the next attempt and why.
    assert d["status"] in ("sleeping", "running", "pending")
    if d["waiting"]:
        assert d["waiting"]["kind"] == "retry" and d["waiting"]["last_error"]["attempt"] == d["waiting"]["attempt"] - 1
    # The retries go on (unlimited by default, as Temporal's): the attempt number keeps growing.
    later = failing(rt, "af-1", err["attempt"] + 1)
    assert later["last_error"]["attempt"] > err["attempt"]
    # Each failed attempt is a log line of the worker's.
    line = re.compile(r"workflow af-1: step 'explode' attempt (\d+) failed: ValueError: boom; retry")
    wait_for(lambda: len(line.findall(workers.log("w1"))) >= 2, timeout=10, message="the worker logs each attempt")
    # The admin's workflow page and the review UI's case page show it.
    c = Client()
    c.force_login(User.objects.create_superuser("root-af", password="pw"))
    for url in (reverse("admin:ilr_workflow_change", args=["af-1"]), reverse("approvals:case", args=["af-1"])):
        r = c.get(url)
        page = r.content.decode()
        assert r.status_code == 200, url
        assert "last failed attempt" in page.lower() and "ValueError" in page and "boom" in page, url
    r = c.get(reverse("admin:ilr_workflow_changelist"))
    assert "ValueError: boom" in r.content.decode()
    rt.cancel("af-1", by="test")
    wait_for(lambda: rt.describe("af-1")["status"] == "cancelled", message="af-1 cancelled")
