"""Statements the tests run on ilr.claims: reads of state the public API does not give, and the rows they seed or
tamper with on purpose."""

from __future__ import annotations

COUNT_CLAIMS_BY_OWNER = "select count(*) as n from ilr.claims where owner = 'T'"
"""Read ilr.claims (``integration/test_claim_plan.test_lapsed_leases_are_taken_first_and_count_against_n``)."""

DISTINCT_OWNER_OF_CLAIMS_BY_WORKFLOW_ID = "select distinct owner from ilr.claims where workflow_id like 'sched:race:%'"
"""Read ilr.claims
(``faults/test_schedules.test_two_workers_racing_a_one_second_schedule_start_each_tick_exactly_once``)."""

EPOCH_OWNER_CLAIMED_AT_ETC_OF_CLAIMS_BY_WORKFLOW_ID = (
    "select epoch, owner, claimed_at, lease_expires_at, prev_status, prev_lease_expires_at "
    "from ilr.claims where workflow_id = %s order by epoch"
)
"""Read ilr.claims (``faults/test_runtime_crash.claims``)."""

EPOCH_OWNER_OF_CLAIMS_BY_WORKFLOW_ID = "select epoch, owner from ilr.claims where workflow_id = %s order by epoch"
"""Read ilr.claims (``faults/test_worker_faults.claims``, ``faults/test_worker_logs.epochs``)."""

EPOCH_OWNER_PREV_STATUS_ETC_OF_CLAIMS_BY_WORKFLOW_ID = (
    "select epoch, owner, prev_status, lease_expires_at from ilr.claims where workflow_id = %s order by epoch"
)
"""Read ilr.claims (``faults/test_orphans_ended.claims_of``)."""

EPOCH_OWNER_PREV_STATUS_OF_CLAIMS_BY_WORKFLOW_ID = (
    "select epoch, owner, prev_status from ilr.claims where workflow_id = %s order by epoch"
)
"""Read ilr.claims (``faults/test_db_restart.claims``)."""

EPOCH_OWNER_VERSION_OF_CLAIMS_BY_WORKFLOW_ID = (
    "select epoch, owner, version from ilr.claims where workflow_id = %s order by epoch"
)
"""Read ilr.claims (``support/db.claims``)."""

FIRST_CLAIM_AT_OF_CLAIMS_BY_WORKFLOW_ID = (
    "select extract(epoch from min(claimed_at))::float8 as t from ilr.claims "
    "where workflow_id like %s group by workflow_id order by 1"
)
"""Read ilr.claims (``faults/test_queues.first_claims``)."""

OWNER_OF_CLAIMS_BY_WORKFLOW_ID_AFTER_GRANT = "select owner from ilr.claims where workflow_id = 'after-grant'"
"""Read ilr.claims (``faults/test_worker_gaps.test_error_that_is_not_a_lost_connection_is_logged_and_claims_go_on``)."""

OWNER_OF_CLAIMS_BY_WORKFLOW_ID_F1 = "select owner from ilr.claims where workflow_id = 'f1' order by epoch"
"""Read ilr.claims (``faults/test_finding1.test_stale_step_load_after_lease_expiry_does_not_rerun_the_body``)."""

OWNER_OF_CLAIMS_BY_WORKFLOW_ID_H1 = "select owner from ilr.claims where workflow_id = 'h1' order by epoch"
"""Read ilr.claims
(``faults/test_concurrency_keys.test_sigkill_of_the_holders_worker_keeps_the_slot_through_the_takeover``)."""

OWNER_OF_CLAIMS_BY_WORKFLOW_ID_NULL_IN = (
    "select owner from ilr.claims where workflow_id = 'null-in' order by epoch desc limit 1"
)
"""Read ilr.claims
(``faults/test_signals_null.test_null_signal_in_takes_the_signal_branch_and_replays_so_after_a_takeover``)."""

OWNER_OF_CLAIMS_BY_WORKFLOW_ID_ORPHAN = "select owner from ilr.claims where workflow_id = 'orphan' order by epoch"
"""Read ilr.claims (``faults/test_effects_bad_input.test_recover_orphans_resolves_a_stuck_workflows_effect``)."""

OWNER_PREV_STATUS_OF_CLAIMS_BY_WORKFLOW_ID = (
    "select owner, prev_status from ilr.claims where workflow_id = 'h-big' order by claimed_at"
)
"""Read ilr.claims (``faults/test_history.test_a_worker_killed_while_replaying_20000_steps_is_taken_over``)."""

SEED_CLAIMS_LEGACY = (
    "insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at, "
    "prev_status) values ('legacy', 1, 'legacy-writer', '1', now(), now(), 'pending')"
)
"""Seed rows of ilr.claims
(``faults/test_signals_null.test_a_signal_row_recorded_before_signal_timeout_replays_as_its_code_read_it``)."""

SEED_CLAIMS_W1 = (
    "insert into ilr.claims values ('W1', 3, 'C', '1', now() - interval '3589 seconds', now(), 'running', "
    "now() - interval '3585 seconds')"
)
"""Seed rows of ilr.claims (``integration/test_invariants``)."""

WORKFLOW_ID_VERSION_OF_CLAIMS_BY_OWNER = "select workflow_id, version from ilr.claims where owner = 'v2only'"
"""Read ilr.claims (``faults/test_parity.test_s14_v2_workers_claim_no_v1_and_an_unpatched_change_is_loud``)."""


def seed_claims_w1(t) -> str:
    """Seed W1's two claims, a takeover after expiry (``integration/test_invariants.seed``):
    ``t(offset)`` renders a time ``offset`` seconds after the seed's start as SQL."""
    return (
        f"insert into ilr.claims values ('W1', 1, 'A', '1', {t(0)}, {t(5)}, 'pending', null), "
        f"('W1', 2, 'B', '1', {t(10)}, {t(15)}, 'running', {t(5)})"
    )
