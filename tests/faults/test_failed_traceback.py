"""A failed workflow keeps its traceback, bounded (issue 39): in ``rt.describe()`` (key
"traceback") and on the admin's workflow page. A real worker subprocess runs workflow code that
raises; real PostgreSQL; the Django test client logged in as a superuser."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.support.waits import wait_for


@pytest.mark.usefixtures("transactional_db")
def test_a_failed_workflow_shows_its_bounded_traceback_in_describe_and_the_admin(rt, workers):
    workers.start("w1")
    rt.start("fails_with_traceback", "tb-short", {"message": "kaboom"})
    # A message far longer than the bound: the traceback is cut, never the frames' tail.
    rt.start("fails_with_traceback", "tb-long", {"message": "x" * 50_000})
    for wf_id in ("tb-short", "tb-long"):
        wait_for(lambda w=wf_id: rt.describe(w)["status"] == "failed", timeout=30, message=f"{wf_id} failed")
    d = rt.describe("tb-short")
    tb = d["traceback"]
    assert tb.startswith("Traceback (most recent call last):"), tb
    assert "in raise_deep" in tb and "in fails_with_traceback" in tb, tb
    assert tb.rstrip().endswith("RuntimeError: kaboom"), tb
    # The error itself is as before: type and message.
    assert d["error"]["type"] == "RuntimeError" and d["error"]["message"] == "kaboom", d["error"]
    assert "traceback" not in d["error"]
    long_tb = rt.describe("tb-long")["traceback"]
    assert len(long_tb) <= 8000, len(long_tb)
    assert "in raise_deep" in long_tb and "RuntimeError: xxx" in long_tb, long_tb[:2000]
    # A workflow that did not fail has none.
    rt.start("three_steps", "tb-ok", {})
    wait_for(lambda: rt.describe("tb-ok")["status"] == "completed", timeout=30, message="tb-ok completed")
    assert rt.describe("tb-ok")["traceback"] is None
    # The admin's workflow page shows it.
    c = Client()
    c.force_login(User.objects.create_superuser("root-tb", password="pw"))
    r = c.get(reverse("admin:ilr_workflow_change", args=["tb-short"]))
    page = r.content.decode()
    assert r.status_code == 200
    assert "traceback" in page.lower() and "in raise_deep" in page and "RuntimeError: kaboom" in page, page[-3000:]
