"""Statements on ilr.steps, ilr.llm_calls and ilr.responses: recorded durable calls."""

from __future__ import annotations

DECIDE_AT_FRONTIER_INSERT_LLM_CALLS = (
    "insert into ilr.llm_calls (workflow_id, seq, epoch, request_hash) values (%s, %s, %s, %s) returning "
    "to_jsonb(started_at) as captured_at"
)
"""Insert into ilr.llm_calls (``_context.steps.StepCalls._decide_at_frontier``)."""

RESPONSE_LOG_WITH_RESPONSES = (
    "with async as (select set_config('synchronous_commit', 'off', true)) insert into ilr.responses "
    "(effect_id, workflow_id, epoch, result) select %s::text, %s::text, %s::bigint, %s::jsonb from async"
)
"""Read and write ilr.responses (``_effects.send._response_log``)."""

DESCRIBE_ON_SELECT_STEPS = (
    "select seq, name, kind, fingerprint, output, error, epoch, created_at from ilr.steps where "
    "workflow_id = %s order by seq"
)
"""Read from ilr.steps (``_ops.reads.describe_on``)."""

FORK_IN_INSERT_STEPS = (
    "insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, error, epoch) select %s, "
    "seq, name, kind, fingerprint, output, error, 1 from ilr.steps where workflow_id = %s and seq < %s "
    "order by seq"
)
"""Insert into ilr.steps (``_ops.workflow_ops.fork_in``)."""

FORK_IN_SELECT_STEPS = "select coalesce(max(seq), 0) as top from ilr.steps where workflow_id = %s"
"""Read from ilr.steps (``_ops.workflow_ops.fork_in``)."""


HISTORY_PAGE_SELECT_STEPS = (
    "select seq, name, kind, fingerprint, output, error from ilr.steps where workflow_id = %s and seq > %s "
    "order by seq limit %s"
)
"""One page of a run's history: its step rows after a seq, in seq order, at most n (keyset
pagination on the primary key; ``_context.history.History``, as the replay reaches them)."""

HISTORY_SIZE_SELECT_STEPS = (
    "select count(*) as length, coalesce(sum(coalesce(octet_length(output::text), 0) "
    "+ coalesce(octet_length(error::text), 0)), 0)::bigint as bytes from ilr.steps where workflow_id = %s"
)
"""A workflow's history size: its step rows and the bytes of their payloads' JSON text, one
aggregate over its primary key range (``_ops.reads.history_on``: the admin's history line)."""
