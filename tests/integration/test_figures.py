"""The operations figures (``ilr._telemetry.figures.figures_on``, issue 46) on real PostgreSQL:
each count and list over a known state (tests/support/ops_state.py), and the bad-input refusals.
A live worker's slots in use: tests/faults/test_figures_live.py."""

from __future__ import annotations

import pytest

from ilr import InvalidInput
from ilr._telemetry.figures import figures_on
from tests.support import ops_state


def test_every_figure_over_a_known_state(rt):
    ops_state.seed(rt.connection())
    f = figures_on(rt.connection(), queues={"bulk": {"concurrency": 2}})
    assert f.approvals_pending == ops_state.PENDING_APPROVALS
    assert ops_state.OLDEST_APPROVAL_AGE <= f.approval_oldest_age_s < ops_state.OLDEST_APPROVAL_AGE + 30
    assert [a["workflow_id"] for a in f.oldest_approvals] == ["apr-old", "apr-new"]
    assert f.effects_ambiguous == 1 and [e["effect_id"] for e in f.ambiguous_effects] == ["eff_ops_amb"]
    assert f.workflows_stuck == 2
    assert {(s["id"], s["why"]) for s in f.stuck} == {
        ("stuck-1", "CrashLoop"),
        ("lapsed-1", "lease of gone lapsed, not taken over"),
    }
    due = {(d["name"], d["version"]): d for d in f.due}
    assert due[("refund", "v1")]["due"] == ops_state.DUE_V1 and due[("refund", "v2")]["due"] == 1
    assert 40 <= due[("refund", "v1")]["oldest_age_s"] < 70
    assert f.due_total == 4 and f.due_oldest_age_s >= 600
    assert [(u["name"], u["version"], u["due"]) for u in f.unserved] == [("refund", "v1", 3), ("refund", "v2", 1)]
    assert f.keys["holding"] == 1 and f.keys["waiting"] == 1 and f.keys["keys_with_waiters"] == 1
    assert f.keys["oldest_waiting_age_s"] >= 45
    assert f.queues == [{"queue": "bulk", "holding": 0, "waiting": 0, "put_off": 0, "oldest_waiting_age_s": None}]
    assert f.schedules_overdue == 1 and f.schedule_lag_s >= 120
    assert f.workers_live == 0 and f.runs_held == 0 and f.workers == []
    # A shorter threshold: the lapsed lease (600 s) still counts; a longer one drops it.
    assert figures_on(rt.connection(), stuck_after=3600).workflows_stuck == 1


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"stuck_after": 0}, "stuck_after"),
        ({"stuck_after": float("nan")}, "stuck_after"),
        ({"schedule_grace": -1}, "schedule_grace"),
        ({"items": 0}, "items"),
        ({"items": True}, "items"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field(rt, kw, field):
    with pytest.raises(InvalidInput) as err:
        figures_on(rt.connection(), **kw)
    assert err.value.field == field
