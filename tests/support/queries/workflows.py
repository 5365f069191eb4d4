"""Statements the tests run on ilr.workflows: reads of state the public API does not give, and the rows they seed or
tamper with on purpose."""

from __future__ import annotations

ANALYZE_WORKFLOWS = "analyze ilr.workflows"
"""Analyze ilr.workflows (``integration/test_approvals_views.test_pages_stay_fast_with_10000_workflows``,
``integration/test_claim_plan.test_a_claim_reads_what_it_takes_not_the_backlog``,
``integration/test_claim_plan.test_a_prioritized_backlog_is_read_through_its_own_index_not_scanned_whole``)."""

COUNT_WORKFLOWS = "select count(*) as n from ilr.workflows"
"""Read ilr.workflows
(``faults/test_tasks.test_bad_options_and_arguments_are_refused_naming_the_field_and_nothing_is_written``,
``faults/test_tasks.test_enqueue_rolls_back_and_commits_with_the_callers_transaction``,
``support/db.count_workflows``)."""

COUNT_WORKFLOWS_BY_ID = "select count(*) as n from ilr.workflows where id = %s"
"""Read ilr.workflows
(``integration/test_schedules.test_tick_rows_past_the_retention_are_pruned_and_never_recorded_again``)."""

COUNT_WORKFLOWS_BY_ID_SCHED_RACE = "select count(*) as n from ilr.workflows where id like 'sched:race:%'"
"""Read ilr.workflows (``integration/test_schedules.test_two_connections_racing_the_tick_start_each_tick_once``)."""

COUNT_WORKFLOWS_BY_NAME = "select count(*) from ilr.workflows where name like 'task:%%'"
"""Read ilr.workflows (``support/task_checks.count_in_new_connection``)."""

COUNT_WORKFLOWS_BY_STATUS_COMPLETED = "select count(*) as n from ilr.workflows where status = 'completed'"
"""Read ilr.workflows (``faults/test_tasks_conformance.test_run_enqueued_task``)."""

COUNT_WORKFLOWS_BY_STATUS_RUNNING = "select count(*) as n from ilr.workflows where status = 'running'"
"""Read ilr.workflows
(``integration/test_claim_plan.test_due_rows_are_claimed_oldest_first_and_n_bounds_the_claim``)."""

DUE_CREATED_AT_OF_WORKFLOWS_BY_ID = "select %s::timestamptz as due, w.created_at from ilr.workflows w where id = 'tz'"
"""Read ilr.workflows (``faults/test_bad_input.test_non_utc_session_time_zone_changes_no_timer``)."""

DUE_OF_WORKFLOWS_BY_ID = (
    "select bool_and(available_at < now() - interval '1.5 seconds') as due from ilr.workflows where id = any(%s)"
)
"""Read ilr.workflows (``faults/test_parity.test_s14_v2_workers_claim_no_v1_and_an_unpatched_change_is_loud``)."""

ID_OF_WORKFLOWS_BY_ID = "select id from ilr.workflows where id <> 'later' order by priority desc, available_at limit 8"
"""Read ilr.workflows
(``integration/test_claim_plan.test_a_prioritized_backlog_is_read_through_its_own_index_not_scanned_whole``)."""

ID_OF_WORKFLOWS_BY_STATUS_WAITING = (
    "select id from ilr.workflows where status = 'sleeping' and waiting->>'signal' = 'approve'"
)
"""Read ilr.workflows (``faults/test_demo.review_queue``)."""

ID_STATUS_OF_WORKFLOWS_BY_ID = "select id, status from ilr.workflows where id = any(%s)"
"""Read ilr.workflows (``support/db.statuses``)."""

ID_STATUS_RESULT_ETC_OF_WORKFLOWS_BY_ID = (
    "select id, status, result, created_at from ilr.workflows where id like %s order by id"
)
"""Read ilr.workflows (``faults/test_schedules.runs_of``)."""


LOCK_WAITERS_ON_WORKFLOWS = (
    "select count(*) as n from pg_stat_activity a, ilr.workflows w "
    "where a.application_name = %s and a.wait_event_type = 'Lock' and w.id = %s "
    "and w.lease_expires_at <= now() and a.xact_start + make_interval(secs => %s) <= now()"
)
"""Read ilr.workflows (``faults/test_worker_faults.stalled_heartbeat_renews_a_lapsed_lease``)."""

LOCK_WORKFLOWS_BY_ID_LAPSE = "select 1 from ilr.workflows where id = 'lapse' for update"
"""Lock rows of ilr.workflows (``faults/test_worker_faults.test_own_lapsed_workflow_taken_back_runs_to_the_end``)."""

LOCK_WORKFLOWS_BY_ID_RACE = "select 1 from ilr.workflows where id = 'race' for update"
"""Lock rows of ilr.workflows (``integration/test_sql_races.test_cancel_waits_for_the_fenced_dispatch``,
``integration/test_sql_races.test_lock_order_workflow_effect_grant``,
``integration/test_sql_races.test_signal_waits_for_the_suspend_and_then_wakes_it``)."""

LOCK_WORKFLOWS_BY_ID = "select id from ilr.workflows where id = %s for update"
"""Lock rows of ilr.workflows (``faults/test_tasks_conformance.test_worker_with_locked_rows``)."""

LOCK_WORKFLOWS_BY_STATUS = "select id from ilr.workflows where status = 'pending' order by id for update skip locked"
"""Lock rows of ilr.workflows
(``integration/test_claim_plan.test_lapsed_leases_are_taken_first_and_count_against_n``)."""

REGCLASS_OF_WORKFLOWS = "select to_regclass('ilr.workflows') as t"
"""Read ilr.workflows (``integration/test_schema.test_migrate_creates_and_migrating_to_zero_drops``)."""


SEED_WORKFLOWS_BENCH_REFUND = (
    "insert into ilr.workflows (id, name, version, input, status, epoch) values (%s, 'bench_refund', '1', '{}', %s, 1)"
)
"""Seed rows of ilr.workflows
(``faults/test_bench_command.test_an_effect_that_landed_by_recovery_is_a_refund_not_a_failure``)."""

SEED_WORKFLOWS_BULK = (
    "insert into ilr.workflows (id, name, version, input, status, epoch, available_at, waiting, created_at) "
    "select 'bulk-' || i, 'refund', %s, '{}'::jsonb, "
    "(array['completed','sleeping','failed','pending'])[i %% 4 + 1], "
    "1, case when i %% 4 = 1 then 'infinity'::timestamptz else now() end, "
    "case when i %% 4 = 1 then %s::jsonb end, now() - make_interval(secs => i) "
    "from generate_series(1, 10000) i"
)
"""Seed rows of ilr.workflows (``integration/test_approvals_views.test_pages_stay_fast_with_10000_workflows``)."""

SEED_WORKFLOWS_CASE_1_1 = (
    "insert into ilr.workflows (id, name, version, input, status, parent_id, parent_close_policy) "
    "values ('case-1/1', 'refund', %s, '{}'::jsonb, 'sleeping', 'case-1', 'abandon')"
)
"""Seed rows of ilr.workflows
(``integration/test_approvals_admin.test_admin_terminate_needs_permission_a_reason_and_confirmation``)."""

SEED_WORKFLOWS_DUE = (
    "insert into ilr.workflows (id, name, version, input, available_at) "
    "select 'due' || lpad(g::text, 6, '0'), 'plan', '1', '{}', "
    "now() - interval '1 hour' + g * interval '1 ms' "
    "from generate_series(1, %s) g"
)
"""Seed rows of ilr.workflows (``integration/test_claim_plan._backlog``)."""

SEED_WORKFLOWS_DUE_PENDING = (
    "insert into ilr.workflows (id, name, version, input, status, epoch, available_at, lease_expires_at) values "
    "('due-pending', 'orphan', '1', '{}', 'pending', 0, now() - interval '1 s', null), "
    "('due-lapsed', 'orphan', '1', '{}', 'running', 1, now(), now() - interval '1 s'), "
    "('later', 'orphan', '2', '{}', 'sleeping', 1, now() + interval '1 hour', null), "
    "('forever', 'orphan', '2', '{}', 'sleeping', 1, 'infinity', null), "
    "('leased', 'orphan', '2', '{}', 'running', 1, now(), now() + interval '1 hour'), "
    "('done', 'orphan', '3', '{}', 'completed', 1, now() - interval '1 s', null)"
)
"""Seed rows of ilr.workflows
(``integration/test_unserved_versions.test_due_is_available_pending_or_sleeping_or_running_with_a_lapsed_lease``)."""

SEED_WORKFLOWS_LATER = (
    "insert into ilr.workflows (id, name, version, input, available_at, priority) "
    "values ('later', 'plan', '1', '{}', now() + interval '1 hour', 100)"
)
"""Seed rows of ilr.workflows
(``integration/test_claim_plan.test_a_prioritized_backlog_is_read_through_its_own_index_not_scanned_whole``)."""

SEED_WORKFLOWS_LEGACY = (
    "insert into ilr.workflows (id, name, version, input, epoch) values ('legacy', 'wake_waiter', '1', %s::jsonb, 1)"
)
"""Seed rows of ilr.workflows
(``faults/test_signals_null.test_a_signal_row_recorded_before_signal_timeout_replays_as_its_code_read_it``)."""

SEED_WORKFLOWS_OTHER = (
    "insert into ilr.workflows (id, name, version, input, status, epoch, available_at, error) "
    "values (%s, 'other', '1', '{}'::jsonb, %s, 1, now(), %s::jsonb)"
)
"""Seed rows of ilr.workflows (``integration/test_review_lists.make_workflow``)."""

SEED_WORKFLOWS_REFUND = (
    "insert into ilr.workflows (id, name, version, input, status) values (%s, 'refund', '1', '{}', %s)"
)
"""Seed rows of ilr.workflows (``integration/test_invariants._workflows``)."""

SEED_WORKFLOWS_REFUND_2 = (
    "insert into ilr.workflows (id, name, version, input, status, epoch) "
    "values (%s, 'refund', 'v1', '{}'::jsonb, 'completed', 1)"
)
"""Seed rows of ilr.workflows (``integration/test_reconcile.make_ambiguous``)."""

SEED_WORKFLOWS_REFUND_3 = (
    "insert into ilr.workflows (id, name, version, input, status, available_at) values "
    "(%s, 'refund', 'v1', '{}'::jsonb, 'pending', now() - make_interval(secs => %s))"
)
"""Seed rows of ilr.workflows (``support/ops_state.seed``)."""

SEED_WORKFLOWS_REFUND_4 = (
    "insert into ilr.workflows (id, name, version, input, status, epoch, available_at, waiting) "
    "values (%s, 'refund', %s, %s::jsonb, %s, 1, 'infinity', %s::jsonb)"
)
"""Seed rows of ilr.workflows (``support/review.make_waiting``)."""

SEED_WORKFLOWS_W1 = (
    "insert into ilr.workflows (id, name, version, input, status, epoch) "
    "values ('W1', 'refund', '1', '{}', 'completed', 2)"
)
"""Seed rows of ilr.workflows (``integration/test_invariants.seed``)."""

SEED_WORKFLOWS_WF_I = "insert into ilr.workflows (id, name, version, input) values ('wf-i', 'i', '1', '{}')"
"""Seed rows of ilr.workflows (``support/review.effect_chain``)."""

SEED_WORKFLOWS_WF_J = "insert into ilr.workflows (id, name, version, input) values ('wf-j', 'j', '1', '{}')"
"""Seed rows of ilr.workflows (``integration/test_journal_chain.conn``)."""

SET_WORKFLOWS_AVAILABLE_AT_BY_ID = "update ilr.workflows set available_at = now() where id = %s"
"""Set columns on ilr.workflows (``faults/test_tasks_conformance.test_run_after``)."""

SET_WORKFLOWS_INPUT_BY_ID = (
    "update ilr.workflows set input = jsonb_set(input, '{task}', to_jsonb(%s::text)) where id = %s"
)
"""Set columns on ilr.workflows (``faults/test_tasks_conformance.test_invalid_task_path``)."""

SET_WORKFLOWS_LEASE_EXPIRES_AT_BY_ID_1_SECOND = (
    "update ilr.workflows set lease_expires_at = now() - interval '1 second' where id = %s"
)
"""Set columns on ilr.workflows
(``integration/test_claim_plan.test_lapsed_leases_are_taken_first_and_count_against_n``)."""

SET_WORKFLOWS_LEASE_EXPIRES_AT_BY_ID_600_S = (
    "update ilr.workflows set lease_expires_at = now() - interval '600 s' where id = 'lapsed-1'"
)
"""Set columns on ilr.workflows (``support/ops_state.seed``)."""

SET_WORKFLOWS_PRIORITY = (
    "update ilr.workflows set priority = (1 + (substr(id, 4)::int % 7)) where substr(id, 4)::int % 2 = 0"
)
"""Set columns on ilr.workflows
(``integration/test_claim_plan.test_a_prioritized_backlog_is_read_through_its_own_index_not_scanned_whole``)."""

SET_WORKFLOWS_PRIORITY_BY_ID_DUE000001 = "update ilr.workflows set priority = -3 where id = 'due000001'"
"""Set columns on ilr.workflows
(``integration/test_claim_plan.test_due_rows_are_claimed_by_priority_then_oldest_first``)."""

SET_WORKFLOWS_PRIORITY_BY_ID_DUE000004 = "update ilr.workflows set priority = 50 where id = 'due000004'"
"""Set columns on ilr.workflows
(``integration/test_claim_plan.test_due_rows_are_claimed_by_priority_then_oldest_first``)."""

SET_WORKFLOWS_PRIORITY_BY_ID_DUE000005 = "update ilr.workflows set priority = 5 where id in ('due000005', 'due000006')"
"""Set columns on ilr.workflows
(``integration/test_claim_plan.test_due_rows_are_claimed_by_priority_then_oldest_first``)."""

SET_WORKFLOWS_STATUS_AVAILABLE_AT_BY_ID = (
    "update ilr.workflows set status = 'sleeping', available_at = now() + interval '1 hour' where id = 'due000002'"
)
"""Set columns on ilr.workflows (``integration/test_claim_plan.test_a_live_lease_and_a_future_row_are_not_claimed``)."""

SET_WORKFLOWS_COMPLETED_PEND = "update ilr.workflows set status = 'completed' where id = 'pend'"
"""Set columns on ilr.workflows
(``integration/test_resume.test_resume_refuses_what_is_not_stuck_and_changes_nothing``)."""

SET_WORKFLOWS_COMPLETED_BY_ID = "update ilr.workflows set status = 'completed' where id = %s"
"""Set columns on ilr.workflows (``integration/test_slot_races``)."""

SET_WORKFLOWS_STATUS_EPOCH_TAKEOVERS_BY_ID = (
    "update ilr.workflows set status = 'stuck', epoch = 7, takeovers = 6, error = %s::jsonb where id = %s"
)
"""Set columns on ilr.workflows (``integration/test_resume.make_stuck``)."""

SET_WORKFLOWS_STATUS_OWNER_LEASE_EXPIRES_AT = (
    "update ilr.workflows set status = 'pending', owner = null, lease_expires_at = null"
)
"""Set columns on ilr.workflows
(``integration/test_claim_plan.test_due_rows_are_claimed_by_priority_then_oldest_first``)."""

SET_WORKFLOWS_STATUS_OWNER_LEASE_EXPIRES_AT_BY_ID = (
    "update ilr.workflows set status = 'completed', owner = null, lease_expires_at = null where id = any(%s)"
)
"""Set columns on ilr.workflows (``integration/test_claim_plan.test_a_claim_reads_what_it_takes_not_the_backlog``)."""

SET_WORKFLOWS_STATUS_WAITING_BY_ID = "update ilr.workflows set status = 'completed', waiting = null where id = 'case-2'"
"""Set columns on ilr.workflows (``integration/test_approvals_admin.test_admin_retire_shows_the_drain_report``)."""

SET_WORKFLOWS_WAITING_BY_ID = "update ilr.workflows set waiting = %s::jsonb where id = 'case-1'"
"""Set columns on ilr.workflows
(``integration/test_approvals_admin.test_admin_says_when_recovery_could_not_read_the_target``)."""

STATUS_ERROR_OF_WORKFLOWS_BY_ID = "select status, error from ilr.workflows where id = 'case-1'"
"""Read ilr.workflows
(``integration/test_approvals_admin.test_admin_terminate_needs_permission_a_reason_and_confirmation``)."""


STATUS_OWNER_EPOCH_ETC_OF_WORKFLOWS_BY_ID = (
    "select status, owner, epoch, lease_expires_at from ilr.workflows where id = %s"
)
"""Read ilr.workflows (``faults/test_orphans_ended.workflow_row``)."""

STATUS_OWNER_OF_WORKFLOWS_BY_ID = "select status, owner from ilr.workflows where id = %s"
"""Read ilr.workflows (``integration/test_sql_races.premise``)."""

TAMPER_WORKFLOWS_CANCEL_REQUESTED_AT = "update ilr.workflows set cancel_requested_at = now() - interval '3599 seconds'"
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_CONCURRENCY_KEY_CONCURRENCY_LIMIT_BY_ID = (
    "update ilr.workflows set concurrency_key = 'acct', concurrency_limit = 1 where id = 'W1'"
)
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_QUEUE_QUEUE_LIMIT_QUEUE_RATES = (
    "update ilr.workflows set queue = 'q', queue_limit = 1000, queue_rates = '{\"rate\": [1, 60]}'"
)
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_STATUS_AVAILABLE_AT_WAITING = (
    "update ilr.workflows set status = 'sleeping', available_at = 'infinity', "
    'waiting = \'{"seq": 4, "kind": "signal", "signal": "approve"}\''
)
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_STATUS_CANCEL_REQUESTED_AT_UPDATED_AT = (
    "update ilr.workflows set status = 'sleeping', cancel_requested_at = now() - interval '1 minute', "
    "updated_at = now(), available_at = now() + interval '1 hour', "
    'waiting = \'{"seq": 4, "kind": "sleep", "name": "sleep"}\''
)
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_STATUS_CONTINUED = "update ilr.workflows set status = 'continued'"
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_STATUS_ERROR_SEQ_2 = (
    'update ilr.workflows set status = \'stuck\', error = \'{"type": "NonDeterminism", "seq": 2}\''
)
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_STATUS_RUNNING = "update ilr.workflows set status = 'running'"
"""Set columns on ilr.workflows (``integration/test_invariants``)."""

TAMPER_WORKFLOWS_STATUS_WAITING_RESULT_BY_ID = (
    "update ilr.workflows set status = 'completed', waiting = null, result = '{}' where id = 'case-1'"
)
"""Set columns on ilr.workflows
(``integration/test_approvals_views.test_stale_approval_of_a_workflow_that_no_longer_waits``)."""

TAMPER_WORKFLOWS_VERSION = "update ilr.workflows set version = '2'"
"""Set columns on ilr.workflows (``integration/test_invariants``)."""


def seed_workflow(cols: str, marks: str) -> str:
    """Seed a refund workflow (``support/ops_state._wf``): ``cols`` its columns, ``marks`` the
    placeholders of the columns past the six first ("" when none)."""
    return (
        f"insert into ilr.workflows ({cols}) values (%s, 'refund', %s, '{{}}'::jsonb, %s, 1"
        + (", " + marks if marks else "")
        + ")"
    )
