"""A version with due work and no live worker is named, not shown as an ordinary sleeper.

Workers record a row per (name, version) they serve in ilr.worker_deployments at start, refresh
it from the heartbeat thread, and delete it on a clean exit; a SIGKILLed worker's rows go stale.
``rt.drain_report()`` says which workers are live per version and whether due work has none;
``rt.unserved()`` lists exactly those pairs; the admin's workflow list and deployments page say
"due, no live worker serves name@version". Real PostgreSQL, real ``ilr_worker`` subprocesses.
The workers here refresh every 0.3 s (ILR_DEPLOYMENT_REFRESH), so a row is stale 0.9 s after a
SIGKILL instead of 15 s.
"""

from __future__ import annotations

import io
import signal

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.support.db import drain
from tests.support.queries.deployments import NAME_VERSION_SEEN_AT_ETC_OF_WORKER_DEPLOYMENTS_BY_WORKER_ID
from tests.support.review import admin_page
from tests.support.waits import wait_for

FAST = {"ILR_DEPLOYMENT_REFRESH": "0.3"}
UNSERVED_V1 = "due, no live worker serves pinned@1"


def rows_of(rt, worker_id) -> list[dict]:
    return (
        rt.connection()
        .execute(
            NAME_VERSION_SEEN_AT_ETC_OF_WORKER_DEPLOYMENTS_BY_WORKER_ID,
            (worker_id,),
        )
        .fetchall()
    )


def test_a_due_v1_workflow_with_only_a_v2_worker_is_named_until_a_v1_worker_starts(rt, workers):
    workers.start("v1a", env=FAST, args=("--only", "pinned@1"))
    workers.start("v2", env=FAST, args=("--only", "pinned@2"))
    wait_for(
        lambda: (
            drain(rt, "pinned", "1").get("workers") == ["v1a"] and drain(rt, "pinned", "2").get("workers") == ["v2"]
        ),
        message="both workers live in drain_report",
    )
    rt.start("pinned", "u1", {"seconds": 2}, version="1")
    wait_for(lambda: rt.describe("u1")["status"] == "sleeping", message="u1 sleeping")
    assert drain(rt, "pinned", "1")["unserved"] is False

    workers.kill("v1a")  # SIGKILL: no clean exit, its row stays until it goes stale
    assert [r["version"] for r in rows_of(rt, "v1a")] == ["1"]
    report = wait_for(
        lambda: (r := drain(rt, "pinned", "1")).get("unserved") and r,
        timeout=20,
        message="pinned@1 due with no live worker",
    )
    assert report["workers"] == [] and report["due"] == 1 and report["counts"] == {"sleeping": 1}
    assert rows_of(rt, "v1a")[0]["live"] is False  # stale, not deleted
    v2 = drain(rt, "pinned", "2")
    assert v2["workers"] == ["v2"] and v2["unserved"] is False and v2["due"] == 0
    unserved = rt.unserved()
    assert [(u["name"], u["version"], u["due"]) for u in unserved] == [("pinned", "1", 1)]
    assert unserved[0]["last_seen"] == rows_of(rt, "v1a")[0]["seen_at"]
    assert rt.describe("u1")["status"] == "sleeping"  # the v2 worker claimed nothing of v1

    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    assert UNSERVED_V1 in admin_page(admin)
    assert UNSERVED_V1 in admin_page(admin, "admin:ilr_deployments")
    assert "due, no live worker serves pinned@2" not in admin_page(admin)
    out = io.StringIO()
    call_command("ilr_check", stdout=out)
    assert "pinned@1" in out.getvalue() and "no live worker" in out.getvalue()

    workers.start("v1b", env=FAST, args=("--only", "pinned@1"))
    wait_for(lambda: drain(rt, "pinned", "1")["workers"] == ["v1b"], message="v1b live for pinned@1")
    assert rt.result("u1", timeout=30) == {"version": "1"}
    report = drain(rt, "pinned", "1")
    assert report["unserved"] is False and report["due"] == 0
    assert rt.unserved() == []
    assert UNSERVED_V1 not in admin_page(admin)
    assert UNSERVED_V1 not in admin_page(admin, "admin:ilr_deployments")


def test_rows_are_refreshed_while_idle_and_deleted_on_a_clean_exit(rt, workers):
    w = workers.start("w1", env=FAST, args=("--only", "pinned@1,pinned@2"))
    first = wait_for(lambda: rows_of(rt, "w1"), message="w1's rows")
    assert [(r["name"], r["version"], r["live"]) for r in first] == [("pinned", "1", True), ("pinned", "2", True)]
    # Idle (no runs held): the heartbeat thread still refreshes every pair, in one statement.
    wait_for(
        lambda: all(r["seen_at"] > f["seen_at"] for r, f in zip(rows_of(rt, "w1"), first)),
        timeout=10,
        message="w1's rows refreshed",
    )
    later = rows_of(rt, "w1")
    assert later[0]["seen_at"] == later[1]["seen_at"]
    w.send_signal(signal.SIGTERM)
    assert w.wait(20) == 0
    assert rows_of(rt, "w1") == []


@pytest.mark.parametrize("flag", ["0", "-1", "nan"])
def test_a_bad_deployment_refresh_is_refused(rt, workers, flag):
    w = workers.start("bad", args=("--deployment-refresh", flag))
    assert w.wait(60) == 2
    assert "--deployment-refresh: must be a positive number of seconds" in workers.log("bad")
