"""Statements on ilr.effects: T_dispatch, T_commit, recovery and their reads."""

from __future__ import annotations

RESOLVE_IN_UPDATE_EFFECTS = "update ilr.effects set state = %s, next_attempt_at = null where effect_id = %s"
"""Set next_attempt_at, state on ilr.effects (``_effects.call_state.resolve``)."""

LOST_AMBIGUOUS_UPDATE_EFFECTS = "update ilr.effects set state = 'ambiguous' where effect_id = %s"
"""Set state on ilr.effects (``_effects.dispatch._lost_ambiguous``)."""

T_DISPATCH_INSERT_EFFECTS = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) values (%s, "
    "%s, %s, %s, %s::jsonb, %s) on conflict (effect_id) do update set effect_id = excluded.effect_id "
    "returning *"
)
"""Insert into ilr.effects (``_effects.dispatch.t_dispatch``)."""

T_DISPATCH_UPDATE_EFFECTS = (
    "update ilr.effects set state = 'dispatched', grant_id = %s, dispatch_workflow_id = %s, "
    "dispatch_epoch = %s, first_dispatched_at = coalesce(first_dispatched_at, now()), send_deadline = "
    "%s, settle_margin = make_interval(secs => %s), sends = sends + 1 where effect_id = %s"
)
"""Set dispatch_epoch, dispatch_workflow_id, first_dispatched_at, grant_id, secs, send_deadline, sends,
settle_margin, state on ilr.effects (``_effects.dispatch.t_dispatch``)."""

T_DISPATCH_UPDATE_EFFECTS_2 = "update ilr.effects set state = 'committed' where effect_id = %s"
"""Set state on ilr.effects (``_effects.dispatch.t_dispatch``,
``_effects.send._commit_pipeline``, ``_effects.send._late_result``)."""

EXECUTE_SELECT_EFFECTS = (
    "select state, payload_hash, dispatch_workflow_id, dispatch_epoch from ilr.effects where effect_id = %s"
)
"""Read from ilr.effects (``_effects.effects.execute``)."""

RECONCILE_IN_LOCK_EFFECTS = "select state, reconciled, now() as now from ilr.effects where effect_id = %s for update"
"""Lock and read rows of ilr.effects (``_effects.reconcile.reconcile_in``)."""

RECONCILE_IN_UPDATE_EFFECTS = (
    "update ilr.effects set reconciled = jsonb_build_object('evidence', %s::jsonb, 'by', %s::text, "
    "'applied', %s::boolean, 'at', to_jsonb(now())) where effect_id = %s returning reconciled"
)
"""Set reconciled on ilr.effects (``_effects.reconcile.reconcile_in``)."""

T_RESOLVE_UPDATE_EFFECTS = (
    "update ilr.effects set dispatch_workflow_id = %s, dispatch_epoch = %s, send_deadline = now() + "
    "make_interval(secs => %s), sends = sends + 1, next_attempt_at = null where effect_id = %s"
)
"""Set dispatch_epoch, dispatch_workflow_id, next_attempt_at, secs, send_deadline, sends on ilr.effects
(``_effects.recovery.t_resolve``)."""

LATE_RESULT_LOCK_EFFECTS = (
    "select state, dispatch_workflow_id, dispatch_epoch, now() as now, extract(epoch from send_deadline "
    "+ settle_margin)::float8 as settle_deadline from ilr.effects where effect_id = %s for update"
)
"""Lock and read rows of ilr.effects (``_effects.send._late_result``)."""

SUSPEND_AFTER_FAILED_SEND_SELECT_EFFECTS = (
    "(select greatest(send_deadline + settle_margin, now() + make_interval(secs => %(delay)s)) from "
    "ilr.effects where effect_id = %(eid)s)"
)
"""Read from ilr.effects (``_effects.send._suspend_after_failed_send``)."""

REFUSE_AFTER_SEND_UPDATE_EFFECTS = (
    "update ilr.effects set state = 'proposed', next_attempt_at = null where effect_id = %s"
)
"""Set next_attempt_at, state on ilr.effects (``_effects.send._refuse_after_send``)."""

SUSPEND_AFTER_FAILED_SEND_SELECT_EFFECTS_2 = "select last_error, sends from ilr.effects where effect_id = %s"
"""Read from ilr.effects (``_effects.send._suspend_after_failed_send``)."""

SUSPEND_AFTER_FAILED_SEND_UPDATE_EFFECTS = (
    "update ilr.effects set last_error = %s::jsonb || jsonb_build_object('at', now()), next_attempt_at = "
    "now() + make_interval(secs => %s) where effect_id = %s and state = 'dispatched' and "
    "dispatch_workflow_id = %s and dispatch_epoch = %s and sends = %s"
)
"""Set last_error, next_attempt_at, secs on ilr.effects (``_effects.send._suspend_after_failed_send``)."""

COMMITTED_BY_US_SELECT_EFFECTS = (
    "select state = 'committed' and dispatch_workflow_id = %s and dispatch_epoch = %s as ours from "
    "ilr.effects where effect_id = %s"
)
"""Read from ilr.effects (``_effects.send._committed_by_us``)."""

LATE_RESULT_INSERT_EFFECTS = (
    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) select %s, "
    "%s, %s, %s, %s::jsonb, %s where exists (select 1 from ilr.workflows where id = %s) on conflict "
    "(effect_id) do nothing"
)
"""Insert into ilr.effects (``_effects.send._late_result``)."""

LATE_RESULT_UPDATE_EFFECTS = "update ilr.effects set late_result = %s::jsonb where effect_id = %s"
"""Set late_result on ilr.effects (``_effects.send._late_result``)."""

REFUSE_AFTER_SEND_LOCK_EFFECTS = (
    "select state, dispatch_workflow_id, dispatch_epoch from ilr.effects where effect_id = %s for update"
)
"""Lock and read rows of ilr.effects (``_effects.send._refuse_after_send``)."""

RESOLVE_REJECTED_RESEND_LOCK_EFFECTS = "select state from ilr.effects where effect_id = %s for update"
"""Lock and read rows of ilr.effects (``_effects.send._resolve_rejected_resend``)."""

REVOKE_IN_SELECT_EFFECTS = (
    "select effect_id from ilr.effects where grant_id = %s and state = 'dispatched' order by effect_id"
)
"""Read from ilr.effects (``_ops.grants.revoke_in``)."""

DESCRIBE_ON_SELECT_EFFECTS = "select * from ilr.effects where workflow_id = %s order by effect_id"
"""Read from ilr.effects (``_ops.reads.describe_on``)."""

AMBIGUOUS_SELECT_EFFECTS = "select * from ilr.effects where state = 'ambiguous' order by first_dispatched_at"
"""Read from ilr.effects (``_ops.runtime.Runtime.ambiguous``)."""


# -- from _effects/call_state.py -----------------------------------------------------------------

SETTLED_UNTIL_SQL = (
    "(select greatest(send_deadline + settle_margin, next_attempt_at) from ilr.effects where effect_id = %(eid)s)"
)
"""When recovery of the effect %(eid)s may act: past send_deadline + settle_margin (A2) and
past next_attempt_at (the resend policy's backoff); greatest() skips a null next_attempt_at."""


# -- from _effects/dispatch.py ------------------------------------------------------------------

LINEAGE_SQL = (
    "with recursive up(start, id, prev, depth) as ("
    "select w.id, w.id, coalesce(w.forked_from, w.continued_from), 0 from ilr.workflows w where w.id in (%s, %s) "
    "union all select up.start, w.id, coalesce(w.forked_from, w.continued_from), up.depth + 1 "
    "from ilr.workflows w join up on w.id = up.prev where up.depth < 1000) "
    "select exists (select 1 from up a join up b on a.id = b.id where a.start = %s and b.start = %s) as kin"
)
"""Whether two workflows (the first and second parameters, again as third and fourth) share an
ancestor by forked_from / continued_from, each counting as its own ancestor."""


# -- from _effects/orphans.py -------------------------------------------------------------------

ORPHANS_SQL = (
    "select e.*, w.status as wf_status, w.name as wf_name, now() > e.send_deadline + e.settle_margin as settled "
    "from ilr.effects e join ilr.workflows w on w.id = e.dispatch_workflow_id "
    "where e.state = 'dispatched' and w.status <> all(%s) "
    "order by e.first_dispatched_at"
)
"""Dispatched effects whose dispatching workflow ended, oldest first, with whether each is settled
(``_effects.orphans``)."""

LOCK_WORKFLOW_SQL = (
    "select status, owner, lease_expires_at, lease_expires_at > now() as live "
    "from ilr.workflows where id = %s for update"
)
"""Lock an orphan's ended workflow row and read its claim (``_effects.orphans``)."""

ORPHAN_CLAIM_SQL = """
with e as (
  select effect_id from ilr.effects
   where effect_id = %(eid)s and state = 'dispatched' and dispatch_workflow_id = %(wf)s
   for update),
u as (
  update ilr.workflows
     set epoch = ilr.next_epoch(epoch), owner = %(owner)s, lease_expires_at = now() + make_interval(secs => %(ttl)s),
         updated_at = now()
   where id = %(wf)s and exists (select from e)
  returning id, epoch, version, lease_expires_at, now() as now),
h as (
  insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at, prev_status,
                          prev_lease_expires_at)
  select id, epoch, %(owner)s, version, now, lease_expires_at, %(status)s, %(prev_lease)s::timestamptz from u)
select epoch from u
"""
"""The synthetic claim, run while the workflow row is locked: only while the effect is still
dispatched by that workflow (its row locked too).

The status is left as it is, ended. That is what keeps the workflow ended while the sweep waits
on the target: the worker claim (claims.CLAIM_SQL) takes only running rows whose lease lapsed
and due pending or sleeping rows, so it never takes this one, however long the sweep takes or
if the sweep dies; ``signal_in`` and ``cancel_in`` refuse an ended status whoever owns the row.
The sweep's own writes pass the fence by owner $recovery (``ilr._queries.workflows.FENCE_SQL``)."""


# -- from _journal/receipts.py ------------------------------------------------------------------

BUNDLE_SQL = (
    "select state, late_result, reconciled, sends, head_hash, head_n, "
    "array(select body from ilr.journal j where j.effect_id = e.effect_id order by seq) as bodies "
    "from ilr.effects e where effect_id = %s"
)
"""The effect row and its entries in one statement: one snapshot, so a commit between two reads
never shows a row ahead of (or behind) its chain."""


# -- recovery and the release to wait (from _effects.call_state, _effects.recovery) ------------------

SETTLED_SQL = "now() > send_deadline + settle_margin and (next_attempt_at is null or now() >= next_attempt_at)"
"""True when recovery of an ilr.effects row may act (the same rule as SETTLED_UNTIL_SQL)."""

RECOVER_READ_SQL = (
    f"select e.*, {SETTLED_SQL} as settled, "
    "extract(epoch from now() - e.first_dispatched_at)::float8 as age "
    "from ilr.effects e where effect_id = %s"
)
"""Recovery's short read of a dispatched effect: its row, whether it is settled, its age in
seconds (``_effects.recovery.recover``)."""

RECOVER_LOCK_SQL = (
    "select state, grant_id, sends, dispatch_workflow_id, dispatch_epoch, "
    f"{SETTLED_SQL} as settled from ilr.effects where effect_id = %s for update"
)
"""Lock the effect row for recovery's resolving transaction and read whether it is settled
(``_effects.recovery.t_resolve``)."""

NO_MORE_WAITING_SQL = "'{}'::jsonb"
"""No more keys in a released workflow's waiting object (``release_to_wait_sql``'s default)."""

UNTIL_PARAM_SQL = "%(until)s::timestamptz"
"""Wait until the time passed as ``until`` (a lost dispatch's settle deadline)."""

UNTIL_DELAY_SQL = "now() + make_interval(secs => %(delay)s)"
"""Wait ``delay`` seconds of database time (a failed lookup's retry)."""

LOOKUP_WAITING_SQL = "jsonb_build_object('lookup_attempt', %(attempt)s::int, 'lookup_error', %(error)s::text)"
"""A failed lookup's attempt number and error, kept in the workflow's waiting object."""

FAILED_SEND_WAITING_SQL = "jsonb_build_object('last_error', %(err)s::jsonb || jsonb_build_object('at', now()))"
"""A failed send's error with the database time, kept in the workflow's waiting object."""


def release_to_wait_sql(until_sql: str, more_waiting_sql: str = NO_MORE_WAITING_SQL) -> str:
    """Release a running workflow, fenced by epoch and live lease, to pending until the time
    ``until_sql`` gives, waiting on its effect (``{seq, kind, effect_id, until}`` plus the jsonb
    object ``more_waiting_sql`` gives); returns the workflow id, or no row when the claim was lost
    (``_effects.call_state.release_until``). Both arguments are statements of
    this module."""
    return (
        "update ilr.workflows w set status = 'pending', owner = null, lease_expires_at = null, "
        "available_at = t.until, updated_at = now(), "
        "waiting = jsonb_build_object('seq', %(seq)s, 'kind', 'effect', 'effect_id', %(eid)s::text, "
        f"'until', to_jsonb(t.until)) || {more_waiting_sql} "
        f"from (select {until_sql} as until) t where w.id = %(wf)s and w.epoch = %(epoch)s "
        "and w.status = 'running' and w.lease_expires_at > now() returning w.id"
    )
