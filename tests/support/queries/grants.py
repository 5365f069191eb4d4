"""Statements the tests run on ilr.grants: reads of state the public API does not give, and the rows they seed or
tamper with on purpose."""

from __future__ import annotations

ALL_LIFE_OF_GRANTS = "select *, expires_at - created_at as life from ilr.grants"
"""Read ilr.grants
(``integration/test_approvals_admin.test_admin_grant_create_needs_permission_and_records_the_user``,
``integration/test_approvals_views.test_approve_issues_a_bound_grant_and_logs_it``,
``integration/test_approvals_views.test_two_person_rule``)."""

ALL_OF_GRANTS_BY_ID = "select * from ilr.grants where id = %s"
"""Read ilr.grants
(``faults/test_approval_requests.test_approved_request_sends_once_under_a_grant_bound_to_the_payload``)."""

ALL_OF_GRANTS_BY_ID_G = "select * from ilr.grants where id = 'G'"
"""Read ilr.grants (``integration/test_invariants.seed``)."""

COUNTS_OF_GRANTS_SIGNALS_EFFECTS = (
    "select (select count(*) from ilr.grants) as grants, (select count(*) from ilr.signals) as signals, "
    "(select count(*) from ilr.effects) as effects"
)
"""Read ilr.grants (``support/db.write_counts``)."""

COUNTS_OF_GRANTS_SIGNALS_RECONCILED_REVOKED_RETIRED_CANCELS = (
    "select (select count(*) from ilr.grants) as grants, (select count(*) from ilr.signals) as signals, "
    "(select count(*) from ilr.effects where reconciled is not null) as reconciled, "
    "(select count(*) from ilr.grants where revoked_at is not null) as revoked, "
    "(select count(*) from ilr.deployments where retired_at is not null) as retired, "
    "(select count(*) from ilr.workflows where cancel_requested_at is not null) as cancels"
)
"""Read ilr.grants (``support/review.counts``)."""

COUNT_GRANTS = "select count(*) as n from ilr.grants"
"""Read ilr.grants
(``browser/test_approval_amounts.test_one_person_under_two_spellings_or_through_ui_and_api_counts_once``,
``browser/test_approval_amounts.test_the_rule_reads_the_amount_field_the_approver_is_shown``,
``faults/test_approval_requests.test_approved_request_sends_once_under_a_grant_bound_to_the_payload`` and 3 more)."""

COUNT_REVOKED_OF_GRANTS = "select count(*) as n, count(revoked_at) as revoked from ilr.grants"
"""Read ilr.grants
(``integration/test_effects_bad_input.test_ids_names_and_numbers_are_checked_before_the_database``)."""

GRANTED_BY_OF_GRANTS = "select granted_by from ilr.grants"
"""Read ilr.grants (``integration/test_approvals_views.test_by_is_the_logged_in_user_never_a_form_field``,
``integration/test_approvals_views.test_one_approver_when_the_request_needs_one``)."""

GRANTED_BY_OF_GRANTS_BY_ID = "select granted_by from ilr.grants where id = %s"
"""Read ilr.grants
(``browser/test_approval_amounts.test_one_person_under_two_spellings_or_through_ui_and_api_counts_once``)."""

LOCK_GRANTS_BY_ID = "select 1 from ilr.grants where id = %s for update"
"""Lock rows of ilr.grants (``faults/test_effects_more.test_revoke_racing_dispatch_is_linearizable``,
``integration/test_sql_races.test_lock_order_workflow_effect_grant``)."""

REVOKED_AT_OF_GRANTS_BY_ID = "select revoked_at from ilr.grants where id = %s"
"""Read ilr.grants (``browser/test_approvals_e2e.test_review_ui_end_to_end``)."""

REVOKED_AT_REVOKED_BY_OF_GRANTS = "select revoked_at, revoked_by from ilr.grants"
"""Read ilr.grants
(``integration/test_approvals_admin.test_admin_revoke_confirms_then_lists_the_effects_that_may_still_land``)."""

REVOKED_AT_REVOKED_BY_OF_GRANTS_BY_ID = "select revoked_at, revoked_by from ilr.grants where id = %s"
"""Read ilr.grants (``integration/test_effects_bad_input.test_revoke_unknown_and_twice``)."""

SEED_GRANTS = (
    "insert into ilr.grants (id, principal, action, max_cents, payload_hash, granted_by) "
    "values ('G', 'refund', 'refund', 2000, %s, 'alice')"
)
"""Seed rows of ilr.grants (``integration/test_invariants.seed``)."""

TAMPER_GRANTS_REVOKED_AT = "update ilr.grants set revoked_at = now() - interval '3599 seconds'"
"""Set columns on ilr.grants (``integration/test_invariants``)."""

TAMPER_GRANTS_REVOKED_AT_BY_ID = "update ilr.grants set revoked_at = now() where id = %s"
"""Set columns on ilr.grants
(``integration/test_sql_races.test_revoke_committed_before_the_grant_read_refuses_the_dispatch``,
``integration/test_sql_races.test_revoke_waits_for_a_dispatch_holding_the_grant``)."""
