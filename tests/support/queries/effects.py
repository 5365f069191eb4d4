"""Statements the tests run on ilr.effects and ilr.responses: reads of state the public API does not give, and the
rows they seed or tamper with on purpose."""

from __future__ import annotations

ALL_SETTLED_AGE_OF_EFFECTS = "select *, true as settled, 0.0::float8 as age from ilr.effects"
"""Read ilr.effects (``integration/test_sql_races.test_revoke_waits_for_a_resolve_holding_the_grant``)."""

ANY_EFFECTS_BY_STATE = "select 1 from ilr.effects where state = 'dispatched'"
"""Read ilr.effects (``faults/test_db_restart.dispatched``)."""

ANY_EFFECTS_BY_WORKFLOW_ID_STATE = "select 1 from ilr.effects where workflow_id = %s and state = 'dispatched'"
"""Read ilr.effects (``faults/test_receipts_verify.test_a_send_the_revoke_listed_in_flight_is_no_false_p3_claim``)."""

COUNT_EFFECTS = "select count(*) as n from ilr.effects"
"""Read ilr.effects (``faults/test_agents.test_a_rejected_approval_tells_the_model_and_sends_nothing``,
``faults/test_agents.test_an_unknown_tool_or_invalid_arguments_go_back_as_an_error_and_nothing_is_sent``,
``faults/test_agents_pydantic_ai.test_a_rejected_approval_is_a_denied_tool_call_the_model_reads`` and 2 more)."""

COUNT_EFFECTS_BY_EFFECT_ID = "select count(*) as n from ilr.effects where effect_id = %s"
"""Read ilr.effects (``integration/test_sql_races.refusing``)."""

COUNT_RESPONSES = "select count(*) as n from ilr.responses"
"""Read ilr.responses (``faults/test_effects_more.test_a_failing_response_log_does_not_block_the_commit``)."""

COUNT_RESPONSES_BY_EFFECT_ID = "select count(*) as n from ilr.responses where effect_id = %s"
"""Read ilr.responses (``faults/test_late_result.test_s08a_late_response_after_claim_expiry``)."""

EFFECT_ID_STATE_GRANT_ID_OF_EFFECTS = "select effect_id, state, grant_id from ilr.effects"
"""Read ilr.effects (``faults/test_agents.test_lookup_then_approved_refund_commits_once_and_the_model_answers``,
``faults/test_openai_agents.test_lookup_then_approved_refund_commits_once_and_the_model_answers``)."""

GRANT_ID_OF_EFFECTS = "select grant_id from ilr.effects"
"""Read ilr.effects (``faults/test_agents.test_above_the_threshold_a_person_approves``,
``faults/test_openai_agents.test_below_the_threshold_the_grant_sends_above_it_a_person_approves``)."""

GRANT_ID_OF_EFFECTS_BY_STATE = "select grant_id from ilr.effects where state = 'committed'"
"""Read ilr.effects (``faults/test_agents.test_policies_a_grant_below_the_threshold_and_a_grant_over_its_cap``)."""

LATE_RESULT_OF_EFFECTS_BY_EFFECT_ID = "select late_result from ilr.effects where effect_id = %s"
"""Read ilr.effects (``faults/test_late_result.test_s08a_late_response_after_claim_expiry``)."""

LOCK_EFFECTS_BY_EFFECT_ID = "select 1 from ilr.effects where effect_id = %s for update"
"""Lock rows of ilr.effects (``support/review.effect_chain``)."""

RECONCILED_OF_EFFECTS_BY_EFFECT_ID = "select reconciled from ilr.effects where effect_id = 'eff_amb'"
"""Read ilr.effects (``integration/test_approvals_views.test_reconcile_requires_evidence_then_records_it``)."""

SEED_EFFECTS_AMB_WF = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, "
    "first_dispatched_at, send_deadline, settle_margin, sends, reconciled) values (%s, 'amb-wf', "
    "'local-refunds', 3, %s::jsonb, %s, 'ambiguous', now() - interval '1 hour', now(), interval '5 s', 1, "
    "%s::jsonb)"
)
"""Seed rows of ilr.effects (``support/ops_state.seed``)."""

SEED_EFFECTS_EFF_J = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) "
    "values ('eff_j', 'wf-j', 't', 1, '{}', 'h')"
)
"""Seed rows of ilr.effects (``integration/test_journal_chain.conn``)."""

SEED_EFFECTS_LOCAL_REFUNDS = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, "
    "first_dispatched_at, send_deadline, settle_margin, sends) values (%s, %s, 'local-refunds', 3, %s::jsonb, "
    "%s, 'ambiguous', now(), now() + interval '3 s', interval '5 s', 1)"
)
"""Seed rows of ilr.effects (``integration/test_reconcile.make_ambiguous``)."""

SEED_EFFECTS_LOCAL_REFUNDS_2 = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, grant_id, "
    "first_dispatched_at, send_deadline, settle_margin, sends) values (%s, %s, 'local-refunds', 3, %s::jsonb, "
    "%s, %s, %s, now(), now() + interval '3 s', interval '5 s', 1)"
)
"""Seed rows of ilr.effects (``support/review.make_effect``)."""

SEED_EFFECTS_W1 = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, "
    "grant_id, "
    "dispatch_workflow_id, dispatch_epoch) values (%s, 'W1', 't', %s, %s::jsonb, %s, %s, 'G', 'W1', 2)"
)
"""Seed rows of ilr.effects (``integration/test_invariants._spare_effect``)."""

SEED_EFFECTS_WF_I = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) "
    "values (%s, 'wf-i', 'refunds', 1, %s::jsonb, %s)"
)
"""Seed rows of ilr.effects (``support/review.effect_chain``)."""

SEED_RESPONSES_W1 = "insert into ilr.responses (effect_id, workflow_id, epoch, result) values (%s, 'W1', 2, '{}')"
"""Seed rows of ilr.responses (``integration/test_invariants.seed``)."""

SEED_RESPONSES_W1_2 = "insert into ilr.responses (effect_id, workflow_id, epoch, result) values (%s, 'W1', 1, '{}')"
"""Seed rows of ilr.responses (``integration/test_invariants``)."""

SENDS_OF_EFFECTS_BY_EFFECT_ID_EFF_J = "select sends from ilr.effects where effect_id = 'eff_j'"
"""Read ilr.effects (``integration/test_journal_chain._sends``)."""

SENDS_OF_EFFECTS_BY_EFFECT_ID = "select sends from ilr.effects where effect_id = %s"
"""Read ilr.effects
(``integration/test_recovery_differential.test_database_path_when_a_lookup_is_due_or_the_policy_spent``)."""

SET_EFFECTS_RECONCILED_BY_EFFECT_ID = (
    'update ilr.effects set reconciled = \'{"by": "ops", "applied": true}\'::jsonb where effect_id = \'eff_rec\''
)
"""Set columns on ilr.effects (``integration/test_review_lists.every_outcome``)."""

SET_EFFECTS_SENDS_FIRST_DISPATCHED_AT_BY_EFFECT_ID = (
    "update ilr.effects set sends = 0, first_dispatched_at = null where effect_id = 'eff_refused'"
)
"""Set columns on ilr.effects (``integration/test_review_lists.every_outcome``)."""

SET_EFFECTS_SEND_DEADLINE_FIRST_DISPATCHED_AT_BY_EFFECT_ID = (
    "update ilr.effects set send_deadline = now() - interval '5 seconds', "
    "first_dispatched_at = now() - make_interval(secs => %s) where effect_id = %s"
)
"""Set columns on ilr.effects (``integration/test_recovery_differential.test_database_path_matches_the_table``)."""

SET_EFFECTS_SEND_DEADLINE_LAST_ERROR_BY_EFFECT_ID = (
    "update ilr.effects set send_deadline = now() - interval '5 seconds', last_error = %s::jsonb where effect_id = %s"
)
"""Set columns on ilr.effects
(``integration/test_recovery_differential.test_database_path_when_a_lookup_is_due_or_the_policy_spent``)."""

SET_EFFECTS_STATE_BY_EFFECT_ID = "update ilr.effects set state = 'committed' where effect_id = %s"
"""Set columns on ilr.effects (``support/review.commit_chain``)."""

SET_EFFECTS_STATE_SENDS_BY_EFFECT_ID = "update ilr.effects set state = 'dispatched', sends = 1 where effect_id = %s"
"""Set columns on ilr.effects (``support/review.effect_chain``)."""

STATE_OF_EFFECTS = "select state from ilr.effects"
"""Read ilr.effects
(``integration/test_sql_races.test_revoke_committed_before_the_grant_read_refuses_the_dispatch``)."""

STATE_OF_EFFECTS_BY_EFFECT_ID = "select state from ilr.effects where effect_id = %s"
"""Read ilr.effects (``integration/test_sql_races.test_local_premises_read_inside_t_dispatch``)."""

STATE_PAYLOAD_OF_EFFECTS_BY_EFFECT_ID = "select state, payload from ilr.effects where effect_id = %s"
"""Read ilr.effects (``faults/test_resend_bound._effect``)."""

STATE_RECONCILED_OF_EFFECTS_BY_EFFECT_ID = "select state, reconciled from ilr.effects where effect_id = %s"
"""Read ilr.effects (``integration/test_reconcile.stored``)."""

STATE_SENDS_OF_EFFECTS = "select state, sends from ilr.effects"
"""Read ilr.effects (``faults/test_recovery_race.test_a_fork_and_its_original_recover_one_send_once``)."""

STATE_SENDS_OF_EFFECTS_BY_EFFECT_ID = "select state, sends from ilr.effects where effect_id = %s"
"""Read ilr.effects
(``faults/test_recovery_lookup.test_recovery_waits_out_an_unreachable_target_instead_of_failing``)."""

TAMPER_EFFECTS_HEAD_HASH_HEAD_N_BY_EFFECT_ID = "update ilr.effects set head_hash = %s, head_n = %s where effect_id = %s"
"""Set columns on ilr.effects
(``browser/test_receipt_integrity.test_a_truncated_journal_reads_truncated_in_verify_and_on_the_receipt_page``)."""

TAMPER_EFFECTS_PAYLOAD_HASH = "update ilr.effects set payload_hash = 'x'"
"""Set columns on ilr.effects
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""

TAMPER_EFFECTS_SENDS = "update ilr.effects set sends = sends + 1"
"""Set columns on ilr.effects (``integration/test_invariants``)."""

TAMPER_EFFECTS_SENDS_BY_EFFECT_ID = "update ilr.effects set sends = sends + %s where effect_id = %s"
"""Set columns on ilr.effects
(``integration/test_journal_chain.test_batched_entries_link_in_order_and_the_staged_update_lands_with_them``)."""

TAMPER_EFFECTS_ONE_MORE_SEND_BY_EFFECT_ID = "update ilr.effects set sends = sends + 1 where effect_id = %s"
"""Set columns on ilr.effects
(``integration/test_journal_chain.test_a_staged_statement_runs_alone_when_no_entry_is_appended``)."""

TAMPER_EFFECTS_SENDS_STATE_RECONCILED_BY_EFFECT_ID = (
    "update ilr.effects set sends = 0, state = 'committed', "
    "reconciled = jsonb_set(reconciled, '{applied}', 'false') where effect_id = %s"
)
"""Set columns on ilr.effects
(``faults/test_receipt_integrity.test_a_reconcile_is_a_signed_entry_and_the_rows_fields_are_checked``)."""

TAMPER_EFFECTS_SEND_DEADLINE_SETTLE_MARGIN = (
    "update ilr.effects set send_deadline = now() - interval '10 seconds', settle_margin = interval '1 second'"
)
"""Set columns on ilr.effects (``integration/test_sql_races.test_revoke_waits_for_a_resolve_holding_the_grant``)."""

TAMPER_EFFECTS_STATE_BY_EFFECT_ID_DISPATCHED = "update ilr.effects set state = 'dispatched' where effect_id = %s"
"""Set columns on ilr.effects
(``browser/test_receipt_integrity.test_a_truncated_journal_reads_truncated_in_verify_and_on_the_receipt_page``)."""

TAMPER_EFFECTS_STATE_BY_EFFECT_ID_NO_SUCH_STATE = "update ilr.effects set state = 'no-such-state' where effect_id = %s"
"""Set columns on ilr.effects (``integration/test_journal_chain.test_a_failing_staged_statement_inserts_no_entry``)."""

TAMPER_EFFECTS_STATE_COMMITTED = "update ilr.effects set state = 'committed'"
"""Set columns on ilr.effects
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""

TAMPER_EFFECTS_STATE_DISPATCHED = "update ilr.effects set state = 'dispatched'"
"""Set columns on ilr.effects
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""

TAMPER_EFFECTS_TIER_SENDS = "update ilr.effects set tier = 3, sends = 2"
"""Set columns on ilr.effects (``integration/test_invariants``)."""


def seed_effects_w1(t) -> str:
    """Seed W1's committed effect (``integration/test_invariants.seed``):
    ``t(offset)`` renders a time ``offset`` seconds after the seed's start as SQL."""
    return (
        f"insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash, state, "
        f"grant_id, "
        f"dispatch_workflow_id, dispatch_epoch, first_dispatched_at, send_deadline, settle_margin, sends) "
        f"values (%s, 'W1', 'local-refunds', 1, %s::jsonb, %s, 'committed', 'G', 'W1', 2, {t(13)}, {t(16)}, "
        f"interval '5 seconds', 1)"
    )
