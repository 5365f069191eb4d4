"""A version with due work and no live worker is named, not shown as an ordinary sleeper: what
counts as due (available pending or sleeping work, or running work whose lease lapsed), on rows
written with plain SQL. Real PostgreSQL. The workers' rows and what they say are in
tests/faults/test_unserved_versions.py.
"""

from __future__ import annotations

import io
import json

from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from tests.support.db import drain
from tests.support.queries.deployments import (
    DELETE_WORKER_DEPLOYMENTS_BY_WORKER_ID,
    SEED_DEPLOYMENTS_ORPHAN,
    SEED_WORKER_DEPLOYMENTS_GONE,
)
from tests.support.queries.workflows import SEED_WORKFLOWS_DUE_PENDING
from tests.support.review import admin_page


def test_due_is_available_pending_or_sleeping_or_running_with_a_lapsed_lease(rt):
    """Rows written with SQL and no worker at all: what counts as due, and what does not."""
    conn = rt.connection()
    conn.execute(SEED_DEPLOYMENTS_ORPHAN)
    conn.execute(SEED_WORKFLOWS_DUE_PENDING)
    assert [(u["name"], u["version"], u["due"], u["last_seen"]) for u in rt.unserved()] == [("orphan", "1", 2, None)]
    # No worker row left: a worker's rows go at its clean exit, so this is not "never served"
    # (it read "no worker seen" after workers had exited cleanly: an operator's find).
    out = io.StringIO()
    call_command("ilr_check", stdout=out)
    assert "orphan@1  2 due, no live worker serves it (no worker row: none left since a clean exit, or none ever)" in (
        out.getvalue()
    )
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    assert "none left since a clean exit, or none ever" in admin_page(admin)
    # The operations page says the same (it read "never", under a version served a minute before).
    operations = admin.get("/admin/ilr/workflow/operations/").content.decode()
    assert "none left since a clean exit, or none ever" in operations and "never" not in operations
    by_version = {r["version"]: r for r in rt.drain_report("orphan")}
    assert {v: (r["due"], r["unserved"], r["workers"]) for v, r in by_version.items()} == {
        "1": (2, True, []),
        "2": (0, False, []),
        "3": (0, False, []),
    }
    # A live row serves the pair; a row past its live_until does not.
    conn.execute(SEED_WORKER_DEPLOYMENTS_GONE)
    assert rt.unserved() == []
    assert drain(rt, "orphan", "1")["workers"] == ["here"]
    conn.execute(DELETE_WORKER_DEPLOYMENTS_BY_WORKER_ID)
    assert [u["last_seen"] is not None for u in rt.unserved()] == [True]
    out = io.StringIO()
    call_command("ilr_check", "--json", stdout=out, stderr=(err := io.StringIO()))
    json.loads(out.getvalue())  # stdout stays the invariants' JSON
    assert "orphan@1" in err.getvalue() and "2 due" in err.getvalue()
