"""Statements the tests run on ilr.approval_requests: reads of state the public API does not give, and the rows they
seed or tamper with on purpose."""

from __future__ import annotations

COUNT_APPROVAL_REQUESTS = "select count(*) as n from ilr.approval_requests"
"""Read ilr.approval_requests
(``browser/test_approval_amounts.test_an_unreadable_amount_under_a_money_rule_is_refused_at_request_time``,
``faults/test_agents.test_an_unknown_tool_or_invalid_arguments_go_back_as_an_error_and_nothing_is_sent``,
``faults/test_agents.test_policies_a_grant_below_the_threshold_and_a_grant_over_its_cap`` and 2 more)."""

COUNT_APPROVAL_REQUESTS_BY_STATUS_APPROVALS = (
    "select count(*) as n from ilr.approval_requests where status <> 'pending' or approvals <> '[]'"
)
"""Read ilr.approval_requests (``support/review.counts``)."""


ID_OF_APPROVAL_REQUESTS_BY_STATUS = "select id from ilr.approval_requests where status = 'pending'"
"""Read ilr.approval_requests (``faults/test_demo.review_queue``)."""

ID_PAYLOAD_SUMMARY_OF_APPROVAL_REQUESTS_BY_WORKFLOW_ID_STATUS = (
    "select id, payload, summary from ilr.approval_requests where workflow_id = %s and status = 'pending'"
)
"""Read ilr.approval_requests (``browser/test_example_project.pending``)."""


REGCLASS_OF_APPROVAL_REQUESTS = "select to_regclass('ilr.approval_requests') is not null as t"
"""Read ilr.approval_requests (``faults/test_demo.review_queue``)."""

SEED_APPROVAL_REQUESTS_WITH_STATUS = (
    "insert into ilr.approval_requests (id, workflow_id, seq, target, action, effect_key, payload, "
    "payload_hash, amount_cents, summary, status, requested_at, expires_at, decided_at, decided_by) "
    "values (%s, %s, 1, 'local-refunds', 'refund', %s, %s::jsonb, %s, 1000, %s, %s, "
    "now() - make_interval(secs => %s), now() + interval '1 hour', "
    "case when %s then now() end, case when %s then 'carol' end)"
)
"""Seed rows of ilr.approval_requests (``support/ops_state.seed``)."""

SEED_APPROVAL_REQUESTS_WITH_PREMISES = (
    "insert into ilr.approval_requests (id, workflow_id, seq, target, action, effect_key, payload, "
    "payload_hash, amount_cents, premises, decision, summary, approvals_needed, expires_at) values "
    "(%s, %s, %s, 'local-refunds', 'refund', %s, %s::jsonb, %s, %s, %s::jsonb, %s::jsonb, %s, %s, "
    "now() + interval '1 day')"
)
"""Seed rows of ilr.approval_requests (``support/review.make_waiting``)."""

SET_APPROVAL_REQUESTS_STATUS_DECIDED_AT_BY_WORKFLOW_ID = (
    "update ilr.approval_requests set status = 'expired', decided_at = now() where workflow_id = 'apr-old'"
)
"""Set columns on ilr.approval_requests
(``faults/test_gauges_prometheus.test_prometheus_scrapes_the_state_gauges_and_promql_returns_the_figures``,
``integration/test_gauges.test_gauges_report_the_figures_and_a_scrape_storm_reads_once``)."""
