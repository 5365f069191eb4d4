"""Statements the tests run on ilr.deployments and ilr.worker_deployments: reads of state the public API does not
give, and the rows they seed or tamper with on purpose."""

from __future__ import annotations

ANY_DEPLOYMENTS_BY_NAME_VERSION = "select 1 from ilr.deployments where name = %s and version = %s"
"""Read ilr.deployments (``faults/test_parity.wait_deployed``)."""

ANY_DEPLOYMENTS_BY_NAME_VERSION_WAKE_WAITER = (
    "select 1 from ilr.deployments where name = 'wake_waiter' and version = '1'"
)
"""Read ilr.deployments
(``faults/test_signals_null.test_a_signal_row_recorded_before_signal_timeout_replays_as_its_code_read_it``)."""

CODE_SHA256_OF_DEPLOYMENTS_BY_NAME_VERSION = (
    "select code_sha256 from ilr.deployments where name = 'versioned' and version = '1'"
)
"""Read ilr.deployments (``faults/test_parity.test_s14_v2_workers_claim_no_v1_and_an_unpatched_change_is_loud``)."""

COUNT_WORKER_DEPLOYMENTS = "select count(*) as n from ilr.worker_deployments"
"""Read ilr.worker_deployments
(``faults/test_pgbouncer.test_transaction_mode_worker_refuses_at_start_in_one_sentence``)."""

DELETE_WORKER_DEPLOYMENTS_BY_WORKER_ID = "delete from ilr.worker_deployments where worker_id = 'here'"
"""Delete rows of ilr.worker_deployments
(``integration/test_unserved_versions.test_due_is_available_pending_or_sleeping_or_running_with_a_lapsed_lease``)."""

NAME_VERSION_SEEN_AT_ETC_OF_WORKER_DEPLOYMENTS_BY_WORKER_ID = (
    "select name, version, seen_at, live_until > now() as live from ilr.worker_deployments "
    "where worker_id = %s order by name, version"
)
"""Read ilr.worker_deployments (``faults/test_unserved_versions.rows_of``)."""

SEED_DEPLOYMENTS_BENCH_REFUND = (
    "insert into ilr.deployments (name, version, code_sha256) values ('bench_refund', '1', 'sha')"
)
"""Seed rows of ilr.deployments
(``faults/test_bench_command.test_an_effect_that_landed_by_recovery_is_a_refund_not_a_failure``)."""

SEED_DEPLOYMENTS_ELSEWHERE = "insert into ilr.deployments (name, version, code_sha256) values ('elsewhere', '1', 'x')"
"""Seed rows of ilr.deployments
(``integration/test_concurrency_keys.test_a_start_of_a_version_this_process_does_not_register_keeps_the_workflows_rule``)."""

SEED_DEPLOYMENTS_I = (
    "insert into ilr.deployments (name, version, code_sha256) values ('i', '1', 'x') on conflict do nothing"
)
"""Seed rows of ilr.deployments (``support/review.effect_chain``)."""

SEED_DEPLOYMENTS_J = "insert into ilr.deployments (name, version, code_sha256) values ('j', '1', 'x')"
"""Seed rows of ilr.deployments (``integration/test_journal_chain.conn``)."""

SEED_DEPLOYMENTS_ORPHAN = (
    "insert into ilr.deployments (name, version, code_sha256) values "
    "('orphan', '1', 'x'), ('orphan', '2', 'x'), ('orphan', '3', 'x')"
)
"""Seed rows of ilr.deployments
(``integration/test_unserved_versions.test_due_is_available_pending_or_sleeping_or_running_with_a_lapsed_lease``)."""

SEED_DEPLOYMENTS_OTHER = (
    "insert into ilr.deployments (name, version, code_sha256) values ('other', '1', 'sha') on conflict do nothing"
)
"""Seed rows of ilr.deployments (``integration/test_review_lists.make_workflow``)."""

SEED_DEPLOYMENTS_PLAN = "insert into ilr.deployments (name, version, code_sha256) values ('plan', '1', 'x')"
"""Seed rows of ilr.deployments (``integration/test_claim_plan.conn``)."""

SEED_DEPLOYMENTS_REFUND = "insert into ilr.deployments (name, version, code_sha256) values ('refund', '1', 'x')"
"""Seed rows of ilr.deployments (``integration/test_invariants.seed``)."""

SEED_DEPLOYMENTS_REFUND_2 = "insert into ilr.deployments (name, version, code_sha256) values ('refund', '2', 'y')"
"""Seed rows of ilr.deployments (``integration/test_invariants``)."""

SEED_DEPLOYMENTS_REFUND_V1 = (
    "insert into ilr.deployments (name, version, code_sha256) values ('refund', 'v1', 'sha') on conflict do nothing"
)
"""Seed rows of ilr.deployments (``integration/test_reconcile.make_ambiguous``)."""

SEED_DEPLOYMENTS_REFUND_VERSION = (
    "insert into ilr.deployments (name, version, code_sha256) values ('refund', %s, 'sha') on conflict do nothing"
)
"""Seed rows of ilr.deployments (``support/ops_state.seed``, ``support/review.make_waiting``)."""

SEED_DEPLOYMENTS_ROLLING = "insert into ilr.deployments (name, version, code_sha256) values ('rolling', '1', 'old')"
"""Seed rows of ilr.deployments
(``integration/test_concurrency_keys.test_a_start_of_a_version_this_process_does_not_register_keeps_the_workflows_rule``)."""

SEED_WORKER_DEPLOYMENTS_GHOST = (
    "insert into ilr.worker_deployments (worker_id, name, version, seen_at, live_until) "
    "values ('ghost', 'three_steps', '1', now() - interval '1 minute', now() - interval '1 second')"
)
"""Seed rows of ilr.worker_deployments
(``faults/test_worker_gaps.test_a_dead_workers_lingering_session_does_not_keep_its_id``)."""

SEED_WORKER_DEPLOYMENTS_GONE = (
    "insert into ilr.worker_deployments (worker_id, name, version, seen_at, live_until) values "
    "('gone', 'orphan', '1', now() - interval '1 min', now() - interval '1 s'), "
    "('here', 'orphan', '1', now(), now() + interval '1 min')"
)
"""Seed rows of ilr.worker_deployments
(``integration/test_unserved_versions.test_due_is_available_pending_or_sleeping_or_running_with_a_lapsed_lease``)."""
