"""Statements the tests run on ilr.signals: reads of state the public API does not give, and the rows they seed or
tamper with on purpose."""

from __future__ import annotations

ALL_OF_SIGNALS = "select * from ilr.signals"
"""Read ilr.signals (``integration/test_approvals_views.test_approve_issues_a_bound_grant_and_logs_it``,
``integration/test_approvals_views.test_reject_sends_a_rejection_the_workflow_handles``)."""

COUNT_SIGNALS = "select count(*) as n from ilr.signals"
"""Read ilr.signals (``integration/test_bad_input.test_signal_to_unknown_workflow``)."""

JSON_NULL_PAYLOAD_OF_SIGNALS_BY_WORKFLOW_ID_NAME = (
    "select payload = 'null'::jsonb as json_null, payload from ilr.signals "
    "where workflow_id = 'null-rt' and name = 'wake'"
)
"""Read ilr.signals (``faults/test_signals_null.test_rt_signal_none_delivers_json_null``)."""

SEED_SIGNALS_LEGACY = (
    "insert into ilr.signals (workflow_id, name, payload, consumed_seq) values ('legacy', 'wake', 'null'::jsonb, 1)"
)
"""Seed rows of ilr.signals
(``faults/test_signals_null.test_a_signal_row_recorded_before_signal_timeout_replays_as_its_code_read_it``)."""

SEED_SIGNALS_W1 = (
    "insert into ilr.signals (workflow_id, name, payload, consumed_seq) values ('W1', 'approve', '{\"ok\": 1}', 1)"
)
"""Seed rows of ilr.signals (``integration/test_invariants.seed``)."""

SEED_SIGNALS_W1_2 = (
    "insert into ilr.signals (workflow_id, name, payload, consumed_seq) values ('W1', 'approve', '{\"ok\": 2}', 2)"
)
"""Seed rows of ilr.signals (``integration/test_invariants``)."""

SEED_SIGNALS_W1_3 = "insert into ilr.signals (workflow_id, name, payload) values ('W1', 'approve', '{}')"
"""Seed rows of ilr.signals (``integration/test_invariants``)."""

SEED_SIGNALS_W1_4 = "insert into ilr.signals (workflow_id, name, payload) values ('W1', 'credit', '{}')"
"""Seed rows of ilr.signals (``integration/test_invariants``)."""

WORKFLOW_ID_COUNT_OF_SIGNALS_BY_WORKFLOW_ID = (
    "select workflow_id, count(*) from ilr.signals where workflow_id like 'race%%' "
    "group by workflow_id having count(*) <> 1 or bool_or(consumed_seq is null)"
)
"""Read ilr.signals (``faults/test_runtime_crash.test_signal_racing_suspend_loses_no_wakeup``)."""
