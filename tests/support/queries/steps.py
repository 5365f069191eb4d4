"""Statements the tests run on ilr.steps and ilr.llm_calls: reads of state the public API does not give, and the rows
they seed or tamper with on purpose."""

from __future__ import annotations

COUNT_LLM_CALLS_BY_WORKFLOW_ID = "select count(*) as n from ilr.llm_calls where workflow_id = %s"
"""Read ilr.llm_calls: a workflow's model calls (``support/agents.llm_calls``)."""

COUNT_LLM_CALLS_BY_WORKFLOW_ID_DEC1 = "select count(*) as n from ilr.llm_calls where workflow_id = 'dec1'"
"""Read ilr.llm_calls (``faults/test_parity_fork.test_decision_recorded_once_across_a_kill``)."""

DISABLE_STEPS_APPEND_ONLY = "alter table ilr.steps disable trigger steps_append_only"
"""Alter ilr.steps (``integration/test_invariants``)."""

KIND_OF_STEPS_BY_WORKFLOW_ID = "select kind from ilr.steps where workflow_id = %s order by seq"
"""Read ilr.steps (``faults/test_tasks.test_retries_back_off_durably_and_keep_every_error``)."""

OUTPUT_OF_STEPS_BY_WORKFLOW_ID_NAME_AG_CARD = (
    "select output from ilr.steps where workflow_id = 'ag-card' and name = 'agent:tool:0.1:lookup_payment'"
)
"""Read ilr.steps (``faults/test_agents_review.test_an_agent_request_card_shows_the_conversation_that_led_to_it``)."""

OUTPUT_OF_STEPS_BY_WORKFLOW_ID_NAME_ATTEMPT = "select output from ilr.steps where workflow_id = %s and name = 'attempt'"
"""Read ilr.steps (``faults/test_tasks_conformance.test_invalid_task_path``)."""

OUTPUT_OF_STEPS_BY_WORKFLOW_ID_SEQ = "select output from ilr.steps where workflow_id = %s and seq = 1"
"""Read ilr.steps (``integration/test_recovery_differential.test_database_path_matches_the_table``)."""

SEED_STEPS_EFFECT = (
    "insert into ilr.steps (workflow_id, seq, name, kind, output, epoch) "
    "values (%s, 1, 'effect', 'effect', %s::jsonb, 1)"
)
"""Seed rows of ilr.steps
(``faults/test_bench_command.test_an_effect_that_landed_by_recovery_is_a_refund_not_a_failure``)."""

SEED_STEPS_LEGACY = (
    "insert into ilr.steps (workflow_id, seq, name, kind, output, epoch) "
    "values ('legacy', 1, 'wake', 'signal', %s::jsonb, 1)"
)
"""Seed rows of ilr.steps
(``faults/test_signals_null.test_a_signal_row_recorded_before_signal_timeout_replays_as_its_code_read_it``)."""

SEED_STEPS_PICK_AMOUNT = (
    "insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, epoch) values "
    "(%s, 1, 'pick_amount', 'decide', 'h', %s::jsonb, 1), (%s, %s, %s, 'step', null, %s::jsonb, 1)"
)
"""Seed rows of ilr.steps (``support/review.make_waiting``)."""

SEED_STEPS_STEP1 = (
    "insert into ilr.steps (workflow_id, seq, name, kind, output, epoch) values (%s, 1, 'step1', 'step', '1', 1)"
)
"""Seed rows of ilr.steps (``integration/test_resume.make_stuck``)."""

SEED_STEPS_W1 = (
    "insert into ilr.steps (workflow_id, seq, name, kind, epoch, created_at) "
    "values ('W1', 9, 'late', 'step', 1, now() - interval '3580 seconds')"
)
"""Seed rows of ilr.steps (``integration/test_invariants``)."""

SEED_STEPS_W1_2 = (
    "insert into ilr.steps (workflow_id, seq, name, kind, output, epoch, created_at) values ('W1', 4, 'sleep', "
    "'sleep', jsonb_build_object('until', to_jsonb(now())), 2, now() - interval '3587 seconds')"
)
"""Seed rows of ilr.steps (``integration/test_invariants``)."""

SEQ_KIND_NAME_ETC_OF_STEPS_BY_WORKFLOW_ID = (
    "select seq, kind, name, fingerprint, output, epoch from ilr.steps where workflow_id = %s order by seq"
)
"""Read ilr.steps: a workflow's recorded steps in order (``support/agents.steps``)."""

SQL_NULL_JSON_NULL_ERROR_ETC_OF_STEPS_BY_WORKFLOW_ID_SEQ = (
    "select output is null as sql_null, output = 'null'::jsonb as json_null, error, fingerprint "
    "from ilr.steps where workflow_id = %s and seq = 1"
)
"""Read ilr.steps (``faults/test_signals_null.wake_row``)."""

TAMPER_DELETE_STEPS = "delete from ilr.steps"
"""Delete rows of ilr.steps
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""

TAMPER_DELETE_STEPS_BY_SEQ = "delete from ilr.steps where seq = 3"
"""Delete rows of ilr.steps (``integration/test_invariants``)."""

TAMPER_STEPS_NAME = "update ilr.steps set name = name"
"""Set columns on ilr.steps
(``integration/test_sql_races.test_constraints_refuse_forks_second_commits_and_rewrites``)."""


def seed_steps_w1(t) -> str:
    """Seed W1's approve, sleep and check steps (``integration/test_invariants.seed``):
    ``t(offset)`` renders a time ``offset`` seconds after the seed's start as SQL."""
    return (
        f"insert into ilr.steps (workflow_id, seq, name, kind, output, epoch, created_at) values "
        f"('W1', 1, 'approve', 'signal', '{{\"ok\": 1}}', 2, {t(11)}), "
        f"('W1', 2, 'sleep', 'sleep', jsonb_build_object('until', to_jsonb({t(11.5)})), 2, {t(12)}), "
        f"('W1', 5, 'check', 'step', '1', 2, {t(14.5)})"
    )


def seed_effect_step_w1(t) -> str:
    """Seed W1's committed effect step (``integration/test_invariants.seed``):
    ``t(offset)`` renders a time ``offset`` seconds after the seed's start as SQL."""
    return (
        f"insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, epoch, created_at) values "
        f"('W1', 3, 'effect:local-refunds', 'effect', %s, '{{\"status\": \"COMMITTED\"}}', 2, {t(14)})"
    )
