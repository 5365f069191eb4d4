"""The demo's one door to the ilr tables: every statement the demos (demo/refund.py, demo/agent.py,
demo/report.py) run on them, named, with a purpose line naming its caller. What the public API
(``ilr.Runtime``) reads is read through it; these are what it does not give. ``tests/unit/test_sql_door.py``
checks that no other module of ``demo`` holds SQL on the ilr tables."""

from __future__ import annotations

# -- ilr.claims -------------------------------------------------------------------------------------

OTHER_OWNER = "select owner from ilr.claims where workflow_id = %s and owner <> all(%s) order by epoch limit 1"
"""The first worker other than the demo's that claimed the case (``demo.refund.Demo._check_claims``)."""

CASE_CLAIMS = "select * from ilr.claims where workflow_id = %s"
"""The case's claims, for its timeline (``demo.report.report``)."""


# -- ilr.approval_requests --------------------------------------------------------------------------

AGENT_PENDING_REQUEST = (
    "select id, payload, premises, approvals_needed, summary, effect_key from ilr.approval_requests "
    "where workflow_id = %s and status = 'pending' order by requested_at limit 1"
)
"""The agent case's oldest pending approval request, with its summary and effect key
(``demo.agent.AgentDemo._asked``)."""

HAS_APPROVAL_REQUESTS = "select to_regclass('ilr.approval_requests') is not null as t"
"""Whether ilr.approval_requests exists, which a database migrated before it lacks (``demo.refund.Demo._asked``)."""

PENDING_REQUEST = (
    "select id, payload, premises, approvals_needed from ilr.approval_requests "
    "where workflow_id = %s and status = 'pending' order by requested_at limit 1"
)
"""The case's oldest pending approval request (``demo.refund.Demo._asked``)."""


# -- ilr.llm_calls ----------------------------------------------------------------------------------

MODEL_CALL_COUNT = "select count(*) as n from ilr.llm_calls where workflow_id = %s"
"""How many model calls the case made, recorded or discarded (``demo.agent.AgentDemo._replay_failures``)."""
