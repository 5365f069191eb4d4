"""Statements on ilr.workflows: the workflow row, its status, its lineage."""

from __future__ import annotations

WAKE_PARENT_UPDATE_WORKFLOWS = (
    "update ilr.workflows set available_at = now(), updated_at = now() where id = %s and status = "
    "'sleeping' and waiting->>'kind' = 'child' and waiting->>'child' = %s"
)
"""Set available_at, updated_at on ilr.workflows (``_db.store.wake_parent``)."""

SUSPEND_UPDATE_WORKFLOWS = (
    "update ilr.workflows set status = 'sleeping', owner = null, lease_expires_at = null, waiting = "
    "%s::jsonb, available_at = case when %s then now() "
    "else coalesce((%s::jsonb #>> '{}')::timestamptz, 'infinity') end, updated_at = now() where id = %s"
)
"""Release a workflow row as sleeping until its deadline (or 'infinity'), or due now when a cancel
it has not seen is pending (``_db.store.suspend``)."""

INSERT_STEP_UPDATE_WORKFLOWS = "update ilr.workflows set takeovers = 0 where id = %s"
"""Set takeovers on ilr.workflows (``_db.store.insert_step``)."""

LOCK_PARENT_LOCK_WORKFLOWS = "select 1 from ilr.workflows where id = %s for update"
"""Lock and read rows of ilr.workflows (``_db.store.lock_parent``)."""

WAIT_CHILD_UPDATE_WORKFLOWS = (
    "update ilr.workflows set status = 'sleeping', owner = null, lease_expires_at = null, waiting = "
    "%s::jsonb, available_at = least(coalesce((%s::jsonb #>> '{}')::timestamptz, 'infinity'), case when "
    "%s then now() + make_interval(secs => %s) else 'infinity' end), updated_at = now() where id = %s"
)
"""Set available_at, lease_expires_at, owner, secs, status, updated_at, waiting on ilr.workflows
(``_db.store.wait_child``)."""

CONTINUE_AS_NEW_UPDATE_WORKFLOWS = (
    "update ilr.workflows set status = 'continued', result = %s::jsonb, owner = null, lease_expires_at = "
    "null, waiting = null, updated_at = now() where id = %s"
)
"""End the run continued: its result names the successor (``_db.lineage.continue_as_new``)."""

START_CHILD_INSERT_WORKFLOWS = (
    "insert into ilr.workflows (id, name, version, input, parent_id, cancel_requested_at, "
    "concurrency_key, concurrency_limit, queue, queue_limit, queue_rates, parent_close_policy, trace_context) "
    "values (%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s) on conflict (id) do nothing "
    "returning id"
)
"""Insert into ilr.workflows (``_db.store.start_child``)."""

CONTINUE_AS_NEW_SELECT_WORKFLOWS = (
    "select id, name, version, parent_id, continued_from, priority, concurrency_key, concurrency_limit, "
    "queue, queue_limit, queue_rates, parent_close_policy, trace_context from ilr.workflows where id = %s"
)
"""Read from ilr.workflows (``_db.lineage.continue_as_new``)."""

CONTINUE_AS_NEW_INSERT_WORKFLOWS = (
    "insert into ilr.workflows (id, name, version, input, parent_id, continued_from, "
    "cancel_requested_at, priority, concurrency_key, concurrency_limit, queue, queue_limit, queue_rates, "
    "parent_close_policy, trace_context) values (%s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s, %s, "
    "%s::jsonb, %s, %s) on conflict (id) do nothing returning id"
)
"""Insert into ilr.workflows (``_db.lineage.continue_as_new``)."""

MARK_STUCK_UNFENCED_UPDATE_WORKFLOWS = (
    "update ilr.workflows set status = 'stuck', error = %s::jsonb, owner = null, lease_expires_at = "
    "null, updated_at = now() where id = %s and epoch = %s and status in ('sleeping', 'pending') "
    "returning id, parent_id"
)
"""Set error, lease_expires_at, owner, status, updated_at on ilr.workflows (``_db.store.mark_stuck_unfenced``)."""

PARENT_KEY_SELECT_WORKFLOWS = "select concurrency_key from ilr.workflows where id = %s"
"""A parent's own concurrency key, which its child may not ask for (``_db.store.start_child``)."""

START_CHILD_SELECT_WORKFLOWS = "select name, parent_id from ilr.workflows where id = %s"
"""Read from ilr.workflows (``_db.store.start_child``)."""

HEARTBEAT_UPDATE_WORKFLOWS = (
    "update ilr.workflows set lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = "
    "now() where id = %(wf)s and epoch = %(epoch)s and owner = %(owner)s and lease_expires_at > now() "
    "returning id"
)
"""Set lease_expires_at, secs, updated_at on ilr.workflows (``_effects.orphans._Heartbeat``)."""

RECOVER_ONE_UPDATE_WORKFLOWS = (
    "update ilr.workflows set owner = null, lease_expires_at = null, updated_at = now() where id = %s "
    "and epoch = %s and owner = %s"
)
"""Set lease_expires_at, owner, updated_at on ilr.workflows (``_effects.orphans._recover_one``)."""

WAKE_UPDATE_WORKFLOWS = (
    "update ilr.workflows set available_at = now(), updated_at = now() where id = %s and status = 'sleeping'"
)
"""Set available_at, updated_at on ilr.workflows (``_ops.approval_requests._wake``)."""

OPEN_FOR_DECISION_LOCK_WORKFLOWS = "select status, cancel_requested_at from ilr.workflows where id = %s for update"
"""Lock and read rows of ilr.workflows (``_ops.approval_requests._open_for_decision``)."""

APPROVE_REQUEST_IN_SELECT_WORKFLOWS = "select name from ilr.workflows where id = %s"
"""Read from ilr.workflows (``_ops.approval_requests.approve_request_in``, ``_ops.runtime.Runtime.start``)."""

MIGRATE_IN_LOCK_WORKFLOWS = "select id, name, version, status, owner from ilr.workflows where id = %s for update"
"""Lock and read rows of ilr.workflows (``_ops.deployments.migrate_in``)."""

MIGRATE_IN_UPDATE_WORKFLOWS = (
    "update ilr.workflows set version = %s, epoch = ilr.next_epoch(epoch), updated_at = now(), status = "
    "case when status = 'stuck' then 'pending' else status end, error = case when status = 'stuck' then "
    "null else error end, available_at = case when status = 'stuck' then now() else available_at end, "
    "takeovers = case when status = 'stuck' then 0 else takeovers end where id = %s returning epoch, "
    "status, now() as now"
)
"""Set available_at, epoch, error, status, takeovers, updated_at, version on ilr.workflows
(``_ops.deployments.migrate_in``)."""

APPROVE_IN_UPDATE_WORKFLOWS = "update ilr.workflows set available_at = now(), updated_at = now() where id = %s"
"""Set available_at, updated_at on ilr.workflows (``_ops.grants.approve_in``, ``_ops.workflow_ops.signal_in``)."""

APPROVE_IN_LOCK_WORKFLOWS = "select id, name, status, waiting from ilr.workflows where id = %s for update"
"""Lock and read rows of ilr.workflows (``_ops.grants.approve_in``)."""

DESCRIBE_ON_SELECT_WORKFLOWS = "select * from ilr.workflows where id = %s"
"""Read from ilr.workflows (``_ops.reads.describe_on``)."""

DESCRIBE_ON_SELECT_WORKFLOWS_2 = "select id from ilr.workflows where parent_id = %s order by created_at"
"""Read from ilr.workflows (``_ops.reads.describe_on``)."""

START_INSERT_WORKFLOWS = (
    "insert into ilr.workflows (id, name, version, input, priority, concurrency_key, concurrency_limit, "
    "dedup_key, queue, queue_limit, queue_rates, trace_context) values (%s, %s, %s, %s::jsonb, %s, %s, %s, "
    "%s, %s, %s, %s::jsonb, %s) on conflict (id) do nothing returning id"
)
"""Insert into ilr.workflows (``_ops.runtime.Runtime.start``)."""

RESULT_SELECT_WORKFLOWS = "select status, result, error from ilr.workflows where id = %s"
"""Read from ilr.workflows (``_ops.runtime.Runtime.result``)."""

RESULT_SELECT_WORKFLOWS_2 = "select id from ilr.workflows where continued_from = %s"
"""Read from ilr.workflows (``_ops.runtime.Runtime.result``)."""

CANCEL_TREE_UPDATE_WORKFLOWS = (
    "update ilr.workflows set cancel_requested_at = now(), cancel_requested_by = %s, updated_at = now(), "
    "available_at = case when status in ('sleeping','pending') then now() else available_at end where id "
    "= %s"
)
"""Set available_at, cancel_requested_at, cancel_requested_by, updated_at on ilr.workflows
(``_ops.workflow_ops._cancel_tree``)."""

LOCK_WORKFLOW_LOCK_WORKFLOWS_KEY = "select id, concurrency_key from ilr.workflows where id = %s for update"
"""Lock a workflow's row and read its concurrency key (``_ops.slots.revoke_lock_in``)."""

DEDUP_LOCK = "select pg_advisory_xact_lock(1229738564, hashtext(%s))"
"""Serialize the starts of one deduplication key (class 'ILRD'; ``_ops.starts.start_in``)."""

DEDUP_FIND = (
    "select id, name, created_at from ilr.workflows where dedup_key = %s "
    "and created_at > now() - make_interval(secs => %s) order by created_at desc limit 1"
)
"""The newest workflow of a deduplication key started inside the window, in seconds (``_ops.starts.start_in``)."""

TERMINATE_UPDATE_WORKFLOWS = (
    "update ilr.workflows set status = 'terminated', error = %s::jsonb, owner = null, lease_expires_at = null, "
    "waiting = null, updated_at = now() where id = %s returning id, parent_id"
)
"""End a workflow terminated, unfenced: its worker's next fenced write finds it no longer running
(``_ops.lifecycle.terminate_in``)."""

ACTIVE_CHILDREN = (
    "select id, parent_close_policy from ilr.workflows where parent_id = %s "
    "and status in ('pending', 'running', 'sleeping') order by id"
)
"""A workflow's children that have not ended, with their parent close policies (``_ops.lifecycle``)."""

PARENT_OF_SELECT_WORKFLOWS = "select parent_id, status, waiting from ilr.workflows where id = %s"
"""A workflow's parent and whether it is queued, read without a lock (``_ops.workflow_ops.cancel_in``)."""

LOCK_WORKFLOW_LOCK_WORKFLOWS = (
    "select id, status, waiting, cancel_requested_at, continued_from, trace_context from ilr.workflows "
    "where id = %s for update"
)
"""Lock and read rows of ilr.workflows (``_ops.workflow_ops._lock_workflow``)."""

CANCEL_IN_WITH_WORKFLOWS = (
    "with recursive tree(id) as (select %s::text union select w.id from ilr.workflows w join tree t on "
    "w.parent_id = t.id) select effect_id from ilr.effects where state = 'dispatched' and "
    "dispatch_workflow_id in (select id from tree) order by effect_id"
)
"""Read and write ilr.workflows, ilr.effects (``_ops.workflow_ops.cancel_in``)."""

CANCEL_TREE_SELECT_WORKFLOWS = (
    "select id, coalesce(parent_close_policy, 'request_cancel') as policy from ilr.workflows where parent_id = %s "
    "and status not in ('completed','failed','cancelled','stuck','continued','terminated') order by id"
)
"""A cancelled workflow's children that have not ended, with their parent close policies
(``_ops.workflow_ops._cancel_tree``)."""

RESUME_IN_LOCK_WORKFLOWS = "select id, status, error from ilr.workflows where id = %s for update"
"""Lock and read rows of ilr.workflows (``_ops.workflow_ops.resume_in``)."""

RESUME_IN_UPDATE_WORKFLOWS = (
    "update ilr.workflows set status = 'pending', available_at = now(), takeovers = 0, error = null, "
    "owner = null, lease_expires_at = null, resumed_by = %s, resumed_at = now(), updated_at = now() "
    "where id = %s returning resumed_at, (select count(*) from ilr.steps where workflow_id = %s) as steps"
)
"""Set available_at, error, lease_expires_at, owner, resumed_at, resumed_by, status, takeovers,
updated_at on ilr.workflows (``_ops.workflow_ops.resume_in``)."""

FORK_IN_SELECT_WORKFLOWS = "select id, name, version from ilr.workflows where id = %s"
"""Read from ilr.workflows (``_ops.workflow_ops.fork_in``)."""

FORK_IN_INSERT_WORKFLOWS = (
    "insert into ilr.workflows (id, name, version, input, forked_from, epoch, priority, concurrency_key, "
    "concurrency_limit, queue, queue_limit, queue_rates) select %s, name, version, input, id, 1, priority, "
    "concurrency_key, concurrency_limit, queue, queue_limit, queue_rates from ilr.workflows where id = %s "
    "on conflict (id) do nothing returning id"
)
"""Insert into ilr.workflows (``_ops.workflow_ops.fork_in``)."""

LOCK_CURRENT_RUN_SELECT_WORKFLOWS = "select id from ilr.workflows where id = %s"
"""Read from ilr.workflows (``_ops.workflow_ops._lock_current_run``)."""


# -- from _db/__init__.py -----------------------------------------------------------------------

FENCE_SQL = """
update ilr.workflows
   set lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
 where id = %(wf)s and epoch = %(epoch)s and (status = 'running' or owner = '$recovery')
   and lease_expires_at > now()
returning cancel_requested_at, now() as now
"""
"""The fence. A worker's claim is status 'running'; an orphan recovery's is owner '$recovery'
on a workflow that keeps its ended status (ilr.orphans), so no worker can claim it. Only that
claim bumps the epoch with this owner and the recovery's restore clears it, so the owner test
admits no other epoch. Both tests read the row the primary key found: the hot path pays no
extra index or round trip."""

FENCE_RESET_TAKEOVERS_SQL = FENCE_SQL.replace("updated_at = now()", "updated_at = now(), takeovers = 0")
"""The fence of a transaction that records a step row: a recorded step ends a crash loop
(docs/protocol.md §3.4), so the same statement resets takeovers."""


# -- from _db/store.py --------------------------------------------------------------------------

RECORD_STEP_SQL = """
with f as (
  update ilr.workflows
     set lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now(), takeovers = 0
   where id = %(wf)s and epoch = %(epoch)s and status = 'running' and lease_expires_at > now()
  returning id, cancel_requested_at, now() as now),
s as (
  insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, error, epoch)
  select f.id, %(seq)s, %(name)s, %(kind)s, %(fingerprint)s, %(output)s::jsonb, %(error)s::jsonb, %(epoch)s
    from f
  returning seq)
select f.cancel_requested_at, f.now, (select count(*) from s) as inserted from f
"""
"""Record one step, fenced: renew the lease of the current claim and insert the step row, in one
statement; returns the cancel request and the database time (``_db.store.record_step``)."""

INSERT_STEP_SQL = (
    "insert into ilr.steps (workflow_id, seq, name, kind, fingerprint, output, error, epoch) "
    "values (%s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s)"
)
"""Insert one step row without the fence, inside a transaction that fenced already
(``_db.store``)."""

FINISH_SQL = """
update ilr.workflows
   set status = %(status)s, result = %(result)s::jsonb, error = %(error)s::jsonb, owner = null,
       lease_expires_at = null, waiting = null, updated_at = now()
 where id = %(wf)s and epoch = %(epoch)s and status = 'running' and lease_expires_at > now()
returning parent_id
"""
"""End a workflow (completed, failed or cancelled), fenced by epoch and live lease; returns its
parent (``_db.store.finish``)."""

ANCESTORS_SQL = """
with recursive a(id) as (
  select forked_from from ilr.workflows where id = %s and forked_from is not null
  union
  select w.forked_from from ilr.workflows w join a on w.id = a.id where w.forked_from is not null)
select id from a
"""
"""The workflows a fork descends from, through forked_from (``_db.store``)."""

CHILD_ROW = "select id, parent_id, continued_from, status, result, error from ilr.workflows where id = %s for share"
"""Read a child workflow's row under a share lock, to hand its outcome to the parent (``_db.store``)."""


def workflow_list_sql(where: str) -> str:
    """Workflow rows (no steps), newest first, at most a limit (the last parameter); ``where`` is
    "" or a where clause of ``column = %s`` terms on status, name and version
    (``_ops.reads.list_query``)."""
    return (
        "select id, name, version, status, epoch, owner, available_at, waiting, result, error, "
        f"created_at, updated_at from ilr.workflows {where} order by created_at desc limit %s"
    )
