"""Statements the tests run on ilr.journal: reads of state the public API does not give, and the rows they seed or
tamper with on purpose."""

from __future__ import annotations

BODY_N_OF_JOURNAL_BY_EFFECT_ID_KIND = (
    "select body, length(body) as n from ilr.journal where effect_id = %s and kind = 'COMMITTED'"
)
"""Read ilr.journal
(``faults/test_input_gaps.test_a_huge_target_answer_is_journaled_bounded_with_its_size_and_hash``)."""

BODY_OF_JOURNAL_BY_KIND_DISPATCHED = "select body from ilr.journal where kind = 'DISPATCHED'"
"""Read ilr.journal (``integration/test_sql_races.test_cancel_waits_for_the_fenced_dispatch``)."""

BODY_OF_JOURNAL_BY_KIND_REFUSED = "select body from ilr.journal where kind = 'REFUSED'"
"""Read ilr.journal (``integration/test_sql_races.test_local_premises_read_inside_t_dispatch``)."""

COUNT_JOURNAL = "select count(*) as n from ilr.journal"
"""Read ilr.journal (``faults/test_recovery_lookup.test_a_target_down_before_the_first_send_is_waited_out_too``,
``integration/test_approvals_admin.test_admin_ilr_tables_are_read_only``,
``integration/test_journal_chain.test_a_failing_staged_statement_inserts_no_entry`` and 2 more)."""

DISABLE_JOURNAL_APPEND_ONLY = "alter table ilr.journal disable trigger journal_append_only"
"""Alter ilr.journal (``faults/test_effects_more.test_receipt_verifies_and_any_flipped_byte_is_evident``,
``integration/test_approvals_views.test_receipt_page_flags_tampering``, ``integration/test_invariants``)."""

ENABLE_JOURNAL_APPEND_ONLY = "alter table ilr.journal enable trigger journal_append_only"
"""Alter ilr.journal (``faults/test_effects_more.test_receipt_verifies_and_any_flipped_byte_is_evident``,
``integration/test_approvals_views.test_receipt_page_flags_tampering``)."""

HASH_OF_JOURNAL_BY_EFFECT_ID = "select hash from ilr.journal where effect_id = %s order by seq desc limit 1"
"""Read ilr.journal (``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""

KIND_OF_JOURNAL = "select kind from ilr.journal order by seq"
"""Read ilr.journal (``integration/test_sql_races.test_local_premises_read_inside_t_dispatch``)."""

KIND_OF_JOURNAL_BY_EFFECT_ID = "select kind from ilr.journal where effect_id = %s order by seq"
"""Read ilr.journal (``faults/test_effects_bad_input.test_reconcile_needs_evidence_and_an_ambiguous_effect``,
``faults/test_late_result.test_s08a_late_response_after_claim_expiry``,
``faults/test_recovery_lookup.test_recovery_waits_out_an_unreachable_target_instead_of_failing``)."""

KIND_PREV_HASH_OF_JOURNAL = "select kind, prev, hash from ilr.journal order by seq"
"""Read ilr.journal
(``integration/test_journal_chain.test_batched_entries_link_in_order_and_the_staged_update_lands_with_them``)."""

SEED_JOURNAL = "insert into ilr.journal (effect_id, kind, body, prev, hash) values (%s,%s,%s,%s,%s)"
"""Seed rows of ilr.journal
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""

MIN_SEQ_OF_JOURNAL = "select min(seq) as s from ilr.journal"
"""Read ilr.journal (``integration/test_approvals_admin.test_admin_ilr_tables_are_read_only``)."""

TAMPER_DELETE_JOURNAL = "delete from ilr.journal"
"""Delete rows of ilr.journal
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""

TAMPER_DELETE_JOURNAL_BY_KIND = "delete from ilr.journal where kind = 'COMMITTED'"
"""Delete rows of ilr.journal (``integration/test_invariants``)."""

TAMPER_DELETE_JOURNAL_BY_SEQ_EFFECT_ID = (
    "delete from ilr.journal where seq = (select max(seq) from ilr.journal where effect_id = %s)"
)
"""Delete rows of ilr.journal
(``browser/test_receipt_integrity.test_a_truncated_journal_reads_truncated_in_verify_and_on_the_receipt_page``)."""

TAMPER_JOURNAL_BODY_BY_EFFECT_ID_KIND = (
    "update ilr.journal set body = replace(body, '\"amount\":2000', '\"amount\":9000') "
    "where effect_id = 'eff_r' and kind = 'DISPATCHED'"
)
"""Set columns on ilr.journal (``integration/test_approvals_views.test_receipt_page_flags_tampering``)."""

TAMPER_JOURNAL_BODY_BY_KIND = "update ilr.journal set body = replace(body, 're_1', 're_2') where kind = 'COMMITTED'"
"""Set columns on ilr.journal (``integration/test_invariants``)."""

TAMPER_JOURNAL_BODY_BY_SEQ_EFFECT_ID = (
    "update ilr.journal set body = overlay(body placing '9' from 60 for 1) "
    "where seq = (select min(seq) from ilr.journal where effect_id = %s)"
)
"""Set columns on ilr.journal (``faults/test_effects_more.test_receipt_verifies_and_any_flipped_byte_is_evident``)."""

TAMPER_JOURNAL_KIND = "update ilr.journal set kind = kind"
"""Set columns on ilr.journal
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""
