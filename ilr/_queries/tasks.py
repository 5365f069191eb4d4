"""Statements of the Django Tasks backend (``ilr.tasks``): a task is a workflow row."""

from __future__ import annotations

ENQUEUE_INSERT_WORKFLOWS = """
with deployed as (
  insert into ilr.deployments (name, version, code_sha256)
  select %(name)s, %(version)s, %(code_sha256)s
   where not exists (select 1 from ilr.deployments where name = %(name)s and version = %(version)s)
  on conflict do nothing)
insert into ilr.workflows (id, name, version, input, priority, available_at)
values (%(id)s, %(name)s, %(version)s, %(input)s::jsonb, %(priority)s, coalesce(%(run_after)s, now()))
returning created_at
"""
"""Insert a task's workflow row, on the caller's Django connection and in its transaction
(``ilr.tasks.InterlockBackend.enqueue``): due at run_after, or now. The row's insert trigger
notifies idle workers at commit, never before.

The (name, version) the row references is deployed by the same statement when it is missing (the
foreign key is checked at the statement's end, after the CTE's insert). Once the deployments row is
committed, ``not exists`` skips the insert, so enqueuers never wait on each other; only two first
enqueues of a queue in concurrent transactions do, the second until the first ends."""

GET_RESULT_SELECT_WORKFLOWS = (
    "select w.id, w.name, w.input, w.status, w.priority, w.result, w.error, w.owner, w.created_at, "
    "w.updated_at, (select min(c.claimed_at) from ilr.claims c where c.workflow_id = w.id), "
    "(select max(c.claimed_at) from ilr.claims c where c.workflow_id = w.id) "
    "from ilr.workflows w where w.id = %s and w.name like 'task:%%'"
)
"""A task's workflow row with its first and last claim times (``_tasks.results.read_result``)."""

GET_RESULT_SELECT_STEPS = (
    "select output from ilr.steps where workflow_id = %s and kind = 'step' and name = 'attempt' "
    "and output is not null order by seq"
)
"""The recorded attempts of a task, in order (``_tasks.results.read_result``)."""
