"""The proving apps' one door to the ilr tables: every statement the benchmarks (prove/bench/), the
harness (prove/harness/) and the peers' drivers (prove/peers/) run on them, named, with a purpose line
naming its caller; by table, then the readers of several tables. What the public API (``ilr.Runtime``)
reads is read through it; these are what it does not give, and what a benchmark measures as it is.
``tests/unit/test_sql_door.py`` checks that no other module of ``prove`` holds SQL on the ilr tables."""

from __future__ import annotations

# -- ilr.workflows ----------------------------------------------------------------------------------

BENCH_START_BATCH = (
    "insert into ilr.workflows (id, name, version, input) "
    "select 'b' || g, 'bench_steps3', '1', '{}' from generate_series(1, %s) g"
)
"""Start the core run's bench_steps3 workflows in one insert (``prove.bench.core.run_core``)."""

BENCH_COMPLETED_COUNT = "select count(*) as c from ilr.workflows where status = 'completed'"
"""How many workflows have completed (``prove.bench.core.run_core``)."""

WORKFLOW_DURATIONS = "select extract(epoch from updated_at - created_at)::float8 as s from ilr.workflows"
"""Each workflow's start-to-last-update time on the database clock, in seconds
(``prove.bench.core.run_core``, ``prove.bench.floors.run_serial_runtime``, ``prove.bench.full_measure.run_runtime``)."""

EXPLAIN_COMPLETED_HISTORY = (
    "insert into ilr.workflows (id, name, version, input, status, result) select 'f' || g, "
    "'bench_steps3', '1', '{}', 'completed', '[0,1,2]' from generate_series(1, %s) g"
)
"""Completed bench_steps3 workflows, the history the claim's plan must skip
(``prove.bench.core.claim_explain_with_history``)."""

EXPLAIN_SLEEPING_HISTORY = (
    "insert into ilr.workflows (id, name, version, input, status, available_at) select 's' || g, "
    "'bench_steps3', '1', '{}', 'sleeping', now() + interval '1 day' from generate_series(1, %s) g"
)
"""Sleeping bench_steps3 workflows due in a day, which the claim's plan must skip
(``prove.bench.core.claim_explain_with_history``)."""

ANALYZE_WORKFLOWS = "analyze ilr.workflows"
"""Refresh the planner's statistics of ilr.workflows after a bulk insert
(``prove.bench.core.claim_explain_with_history``, ``prove.bench.core._claim_rate``)."""

EXPLAIN_DUE_WORKFLOW = "insert into ilr.workflows (id, name, version, input) values ('due', 'bench_steps3', '1', '{}')"
"""The one due workflow the claim's plan must find (``prove.bench.core.claim_explain_with_history``)."""

CLAIM_RATE_BACKLOG = (
    "insert into ilr.workflows (id, name, version, input) select %s || g, 'bench_steps3', '1', '{}' "
    "from generate_series(1, %s) g"
)
"""The claim-rate run's pending workflows, ids prefixed, in one insert (``prove.bench.core._claim_rate``)."""

CLAIM_RATE_FINISH = (
    "update ilr.workflows set status = 'completed', owner = null, lease_expires_at = null where id = any(%s)"
)
"""Complete and release claimed workflows, so they leave the claimable set (``prove.bench.core._claim_rate``)."""

FULL_START_WORKFLOW = "insert into ilr.workflows (id, name, version, input) values (%s, %s, '1', %s::jsonb)"
"""Start one workflow by inserting its row (``prove.bench.full_measure.run_runtime``)."""

KEYS_START_WORKFLOW = (
    "insert into ilr.workflows (id, name, version, input, concurrency_key, concurrency_limit) "
    "values (%s, %s, '1', %s::jsonb, %s, %s)"
)
"""Start one workflow with a concurrency key and limit, or with neither (both null), by inserting
its row: the columns ``Runtime.start`` writes, whose insert trigger takes a slot or queues
(``prove.bench.full_measure.run_runtime`` for ``prove.bench.keys``)."""

FULL_ENDED_COUNT = "select count(*) as c from ilr.workflows where status in ('completed','failed','stuck')"
"""How many workflows have ended (completed, failed or stuck) (``prove.bench.full_measure.run_runtime``)."""

FULL_NOT_COMPLETED = "select id, status, error from ilr.workflows where status <> 'completed' order by id"
"""The workflows that did not complete, with their errors (``prove.bench.full_measure._failures``)."""

RESTART_START_INFLIGHT = (
    "insert into ilr.workflows (id, name, version, input) values (%s, 'restart_inflight', '1', %s::jsonb)"
)
"""Start one restart_inflight workflow (``prove.bench.restart.run``)."""

RESTART_START_WAITING = (
    "insert into ilr.workflows (id, name, version, input) "
    "select x, 'restart_waiting', '1', '{}' from unnest(%s::text[]) x"
)
"""Start the restart_waiting workflows in one insert (``prove.bench.restart.run``)."""

RESTART_RUNNING_AND_SLEEPING = (
    "select count(*) filter (where status = 'running' and name = 'restart_inflight') as running, "
    "count(*) filter (where status = 'sleeping') as sleeping from ilr.workflows"
)
"""How many in-flight workflows run and how many sleep, before the restart (``prove.bench.restart.run``)."""

RESTART_ENDED = "select id, status from ilr.workflows where id = any(%s) and status in ('completed','stuck','failed')"
"""Which of the given workflows have ended (``prove.bench.restart.run.progressed``)."""

FAILOVER_START = "insert into ilr.workflows (id, name, version, input) values (%s, 'failover_pay', '1', %s::jsonb)"
"""Start one failover_pay workflow (``prove.harness.failover.run``)."""

FAILOVER_COMPLETED_COUNT = "select count(*) as n from ilr.workflows where status = 'completed'"
"""How many workflows have completed (``prove.harness.failover.run``)."""

FAILOVER_ACTIVE_COUNT = (
    "select count(*) as n from ilr.workflows where status not in ('completed','failed','cancelled','stuck')"
)
"""How many workflows have not ended (``prove.harness.failover.run``)."""

FAILOVER_RUNNING_COUNT = "select count(*) as n from ilr.workflows where status = 'running'"
"""How many workflows are running (``prove.harness.failover.run``)."""

FAILOVER_ENDED_AND_TOTAL = (
    "select count(*) filter (where status in ('completed','failed','cancelled',"
    "'stuck')) as ended, count(*) as n from ilr.workflows"
)
"""How many workflows have ended, and how many there are (``prove.harness.failover.run.all_done``)."""

FAILOVER_OUTCOMES = "select id, status, result, error from ilr.workflows"
"""Every workflow's status, result and error: the run's outcome (``prove.harness.failover.run``)."""

S14_STATUSES = "select id, status, waiting, error from ilr.workflows where id = any(%s)"
"""The given workflows' status, waiting state and error (``prove.harness.s14.runtime.statuses``)."""

SOAK_STATUS_COUNTS = "select status, count(*) as n from ilr.workflows group by status"
"""How many workflows have each status (``prove.harness.soak.Soak._statuses``)."""

SOAK_ACTIVE_STATUS_COUNTS = (
    "select status, count(*) as n from ilr.workflows where status not in "
    "('completed','failed','cancelled','stuck','continued') group by status"
)
"""How many workflows not yet ended have each status (``prove.harness.soak.Soak._drain``)."""

SOAK_REPORT_WORKFLOWS = "select name, status, count(*) as n from ilr.workflows group by 1, 2 order by 1, 2"
"""How many workflows of each name have each status (``prove.harness.soak_report.collect_report.body``)."""

SOAK_REPORT_REFUND_OUTCOMES = (
    "select result->>'status' as status, count(*) as n from ilr.workflows where name = 'refund' group by 1 order by 1"
)
"""How many refund workflows ended with each result status (``prove.harness.soak_report.collect_report.body``)."""

RECORDS_WORKFLOWS = "select id, status, epoch, error, result from ilr.workflows where id = any(%s)"
"""The given workflows' rows (``prove.peers.systems.RuntimeSystem.records``)."""


# -- ilr.steps --------------------------------------------------------------------------------------

STEP_GAPS = (
    "select extract(epoch from created_at - lag(created_at) over "
    "(partition by workflow_id order by seq))::float8 as s from ilr.steps"
)
"""The time from each step to the one before it in its workflow, in seconds
(``prove.bench.core.run_core``, ``prove.bench.full_measure.run_runtime``)."""

FULL_EFFECT_STEP_TIMES = (
    "select extract(epoch from s.created_at - p.created_at)::float8 * 1000 as ms from ilr.steps s "
    "join ilr.steps p on p.workflow_id = s.workflow_id and p.seq = s.seq - 1 where s.kind = 'effect'"
)
"""Each effect step's time after the step before it, in ms (``prove.bench.full_measure.run_runtime``)."""

FULL_EFFECT_OUTPUTS = "select workflow_id, output from ilr.steps where kind = 'effect' order by workflow_id"
"""Every effect step's output, by workflow (``prove.bench.full_measure._failures``)."""

FULL_EFFECT_STATUS_COUNTS = (
    "select output->>'status' as status, count(*) as n from ilr.steps where kind = 'effect' group by 1 order by 1"
)
"""How many effect steps ended with each status (``prove.bench.full_measure._effect_statuses``)."""

FAILOVER_STEP_COUNT = "select count(*) as n from ilr.steps"
"""How many steps are recorded (``prove.harness.failover.run``)."""

S14_STEPS = "select workflow_id, seq, name from ilr.steps where workflow_id = any(%s)"
"""The given workflows' steps (``prove.harness.s14.runtime``)."""

RECORDS_STEPS = (
    "select workflow_id, seq, name, kind, output, epoch, created_at, "
    "extract(epoch from created_at)::float8 as ts from ilr.steps "
    "where workflow_id = any(%s) order by workflow_id, seq"
)
"""The given workflows' steps in order, each with its database time in epoch seconds
(``prove.peers.systems.RuntimeSystem.records``)."""


# -- ilr.claims -------------------------------------------------------------------------------------

TAKEOVER_COUNT = "select count(*) as c from ilr.claims where prev_status = 'running'"
"""How many claims took over a running workflow (a lease expired) (``prove.bench.full_measure.run_runtime``)."""

RESTART_OUTCOME_COUNTS = (
    "select (select count(*) from ilr.claims where prev_status = 'running') as takeovers, "
    "(select count(*) from ilr.workflows where status = 'stuck') as stuck, "
    "(select count(*) from ilr.workflows where status = 'completed') as completed"
)
"""Takeovers, stuck and completed workflows, counted after the restart (``prove.bench.restart.run``)."""

S14_CLAIMS_BY_OWNER = "select workflow_id, owner from ilr.claims where workflow_id = any(%s) and owner = %s"
"""The given workflows' claims by one worker (``prove.harness.s14.runtime``)."""

SOAK_REPORT_TAKEOVERS = (
    "select count(*) as n, coalesce(max(k), 0) as max_per_workflow from ("
    "select workflow_id, count(*) as k from ilr.claims where prev_status = 'running' "
    "group by 1) t"
)
"""How many takeovers, and the most of one workflow (``prove.harness.soak_report.collect_report.body``)."""

SOAK_REPORT_CLAIM_COUNT = "select count(*) as n from ilr.claims"
"""How many claims were made (``prove.harness.soak_report.collect_report.body``)."""

RECORDS_CLAIMS = (
    "select workflow_id, epoch, owner, claimed_at, prev_status from ilr.claims "
    "where workflow_id = any(%s) order by workflow_id, epoch"
)
"""The given workflows' claims in order (``prove.peers.systems.RuntimeSystem.records``)."""


# -- ilr.slots --------------------------------------------------------------------------------------

KEYS_MAX_HOLDERS = """
with ev as (
  select key, acquired_at as t, 1 as d from ilr.slots where acquired_at is not null
  union all
  select key, released_at, -1 from ilr.slots where acquired_at is not null and released_at is not null),
held as (
  select key, sum(d) over (partition by key order by t, d rows unbounded preceding) as n from ev)
select key, max(n)::int as max_holders,
       (select max(slot_limit) from ilr.slots s where s.key = held.key)::int as slot_limit
  from held group by key order by key
"""
"""Each key's most simultaneous holders, swept over its holding intervals [acquired_at,
released_at) in time order, a release before an acquisition at the same instant; with its limit
(``prove.bench.keys.key_figures``)."""

KEYS_SLOT_COUNTS = (
    "select count(*)::int as rows, count(*) filter (where acquired_at > queued_at)::int as admitted, "
    "count(*) filter (where released_at is null)::int as live, count(distinct key)::int as keys from ilr.slots"
)
"""How many slot rows, how many of them were admitted from the queue, how many are still live
(holding or waiting), over how many keys (``prove.bench.keys.key_figures``)."""

KEYS_ADMISSIONS = """
select extract(epoch from s.prev_released)::float8 as released,
       extract(epoch from s.acquired_at)::float8 as acquired,
       extract(epoch from (select min(c.claimed_at) from ilr.claims c
                            where c.workflow_id = s.workflow_id))::float8 as claimed
  from (select workflow_id, queued_at, acquired_at,
               lag(released_at) over (partition by key, slot_no order by acquired_at) as prev_released
          from ilr.slots where acquired_at is not null) s
 where s.acquired_at > s.queued_at and s.prev_released is not null
"""
"""Each waiter admitted from the queue: the release of the slot's previous holder, its own
acquisition and its first claim, in epoch seconds (``prove.bench.keys.key_figures``)."""

KEYS_CLAIM_TIMES = "select extract(epoch from claimed_at)::float8 as t from ilr.claims order by claimed_at"
"""Every claim's time in epoch seconds, in order: how many claims came between a waiter's
admission and its own (``prove.bench.keys.key_figures``)."""

KEYS_MAX_RUNNING = """
with runs as (
  select w.concurrency_key as key, min(c.claimed_at) as t0, w.updated_at as t1
    from ilr.workflows w join ilr.claims c on c.workflow_id = w.id
   where w.concurrency_key is not null and w.status in ('completed', 'failed', 'cancelled')
   group by w.id),
ev as (select key, t0 as t, 1 as d from runs union all select key, t1, -1 from runs),
held as (select key, sum(d) over (partition by key order by t, d rows unbounded preceding) as n from ev)
select coalesce(max(n), 0)::int as max_running from held
"""
"""The most workflows of one key that ran at once, from their own record: each from its first
claim to its end (the ending write's updated_at), swept per key (``prove.bench.keys.key_figures``)."""


# -- ilr.effects ------------------------------------------------------------------------------------

FAILOVER_EFFECTS = "select effect_id, tier, state from ilr.effects order by effect_id"
"""Every effect's tier and state, to hold its receipt against the ledger
(``prove.harness.failover_checks.check_receipts``)."""

SOAK_REPORT_EFFECT_STATES = "select tier, state, count(*) as n from ilr.effects group by 1, 2 order by 1, 2"
"""How many effects of each tier are in each state (``prove.harness.soak_report.collect_report.body``)."""

SOAK_REPORT_SENDS = "select coalesce(sum(sends), 0) as n from ilr.effects"
"""How many sends the effects made in all (``prove.harness.soak_report.collect_report.body``)."""

RECORDS_EFFECT_IDS = "select effect_id from ilr.effects where workflow_id = any(%s) order by effect_id"
"""The given workflows' effect ids (``prove.peers.systems.RuntimeSystem.effect_ids``)."""

RECORDS_EFFECTS = (
    "select effect_id, state, sends, late_result is not null as late, dispatch_epoch "
    "from ilr.effects where workflow_id = any(%s)"
)
"""The given workflows' effects: state, sends, a late result or not, dispatch epoch
(``prove.peers.systems.RuntimeSystem.records``)."""


# -- ilr.journal ------------------------------------------------------------------------------------

DISPATCHED_ENTRIES = "select effect_id, body from ilr.journal where kind = 'DISPATCHED'"
"""Every DISPATCHED journal entry's body, with its effect (``prove.harness.failover_checks.lost_send_rule``)."""


# -- ilr.signals ------------------------------------------------------------------------------------

FAILOVER_GO_SIGNALS = "select workflow_id from ilr.signals where name = 'go'"
"""The workflows that have a go signal (the ones a switch did not lose)
(``prove.harness.failover_workers.Signaller.resend_lost``)."""

RECORDS_SIGNALS = "select workflow_id, name, consumed_seq from ilr.signals where workflow_id = any(%s)"
"""The given workflows' signals and the step that consumed each (``prove.peers.systems.RuntimeSystem.records``)."""


# -- ilr.grants -------------------------------------------------------------------------------------

BASELINE_GRANT = "select id, revoked_at, expires_at, max_cents from ilr.grants where id = %s"
"""One grant, read without a lock for the baselines' pre-send check
(``prove.peers.dbos_baseline.GrantsDB.fetch``, ``prove.peers.temporal_baselines.GrantsDB.fetch``)."""


# -- ilr.deployments --------------------------------------------------------------------------------

BENCH_DEPLOY = "insert into ilr.deployments (name, version, code_sha256) values ('bench_steps3', '1', %s)"
"""Deploy bench_steps3 version 1 with its code hash (``prove.bench.core.run_core``)."""

EXPLAIN_DEPLOY = "insert into ilr.deployments values ('bench_steps3', '1', 'x')"
"""Deploy bench_steps3 version 1 for the EXPLAIN's history (``prove.bench.core.claim_explain_with_history``)."""

RESTART_DEPLOY = "insert into ilr.deployments (name, version, code_sha256) values (%s, '1', %s) on conflict do nothing"
"""Deploy a restart workflow's version 1, unless it is deployed (``prove.bench.restart.run``)."""

S14_DEPLOYED = "select 1 from ilr.deployments where name = %s and version = %s"
"""Whether a workflow version is deployed (``prove.harness.s14.runtime.deployed``)."""


# -- ilr.worker_deployments -------------------------------------------------------------------------

FAILOVER_WORKER_COUNT = "select count(distinct worker_id) as n from ilr.worker_deployments"
"""How many workers have registered what they serve (``prove.harness.failover.run``)."""


# -- ilr.llm_calls ----------------------------------------------------------------------------------

AGENTS_MODEL_CALL_COUNT = "select count(*) as n from ilr.llm_calls where workflow_id = %s"
"""How many model calls a workflow made, recorded or discarded (``prove.harness.agents_report.Matrix._cell``)."""

RECORDS_LLM_CALLS = "select * from ilr.llm_calls where workflow_id = any(%s)"
"""The given workflows' model calls (``prove.peers.systems.RuntimeSystem.records``)."""


# -- ilr.timelines ----------------------------------------------------------------------------------

FAILOVER_TIMELINES = "select timeline_id from ilr.timelines order by 1"
"""The timelines the cluster has recorded (``prove.harness.failover.run``)."""

FAILOVER_HAS_TIMELINES = "select to_regclass('ilr.timelines') as t"
"""Whether ilr.timelines exists, which a later migration adds (``prove.harness.failover.run``)."""


# -- readers of several tables -----------------------------------------------------------------------

SERIAL_PHASES_SQL = """
select extract(epoch from c.claimed_at - w.created_at) * 1000 as "start to claim",
       extract(epoch from s1.created_at - c.claimed_at) * 1000 as "claim to step 1",
       extract(epoch from s4.created_at - s1.created_at) / 3 * 1000 as "each of steps 2 to 4",
       extract(epoch from w.updated_at - s4.created_at) * 1000 as "step 4 to finish"
  from ilr.workflows w
  join ilr.claims c on c.workflow_id = w.id
  join ilr.steps s1 on s1.workflow_id = w.id and s1.seq = 1
  join ilr.steps s4 on s4.workflow_id = w.id and s4.seq = 4
 where w.status = 'completed'
"""
"""The serial 4-step workflows' phases on the database clock (each stamp a transaction's now():
the start's insert, the claim, the step records, the finish); one claim per workflow here
(``prove.bench.floors.serial_phases``)."""

SNAPSHOT_SQL = {
    "steps": "select workflow_id || ':' || seq as k from ilr.steps",
    "journal": "select hash as k, kind from ilr.journal",
    "signals": "select workflow_id || ':' || name || ':' || payload::text as k, consumed_seq from ilr.signals",
    "effects": "select effect_id as k, state, tier from ilr.effects",
    "claims": "select workflow_id || ':' || epoch as k, owner, claimed_at from ilr.claims",
    "workflows": "select id as k, status from ilr.workflows",
}
"""Every row key of each table the failover run compares, one statement per table, read in one
repeatable-read snapshot (``prove.harness.failover_checks.snapshot``)."""


# -- PostgreSQL's statistics -------------------------------------------------------------------------

KEYS_WORKER_WAITS = (
    "select coalesce(wait_event_type || ':' || wait_event, 'CPU') as wait, count(*)::int as n "
    "from pg_stat_activity where datname = %s and application_name like 'ilr-worker-%%' and state <> 'idle' "
    "group by 1"
)
"""What the workers' busy backends of a database wait on now, by wait event ('CPU': none), counted
(``prove.bench.keys.WaitSampler``)."""


# -- bench_tasks (Django tasks on ilr.tasks) ------------------------------------------------------

TASKS_BENCH_RESET_SQL = "truncate ilr.workflows cascade"
"""Empty the task workflows before a bench_tasks round (``prove.bench.tasks_backends.INTERLOCK``)."""

TASKS_BENCH_DONE_SQL = (
    "select count(*) filter (where status in ('completed', 'failed', 'cancelled', 'stuck')), count(*) "
    "from ilr.workflows where name = 'task:default'"
)
"""How many tasks have ended, of how many (``prove.bench.tasks_backends.INTERLOCK``)."""

TASKS_BENCH_STAMPS_SQL = (
    "select w.id, w.status = 'completed' and w.result->'value' = to_jsonb((w.input->'args'->>0)::int "
    "+ (w.input->'args'->>1)::int), extract(epoch from w.created_at)::float8, "
    "extract(epoch from w.updated_at)::float8, "
    "(select count(*) from ilr.steps s where s.workflow_id = w.id and s.name = 'attempt') "
    "+ (w.status = 'completed')::int "
    "from ilr.workflows w where w.name = 'task:default' and w.id = any(%s)"
)
"""Each task's outcome (right sum), enqueue and finish times, and attempts: its failed attempts
are steps and its successful one is the result (``prove.bench.tasks_backends.INTERLOCK``)."""

TASKS_BENCH_WORKERS_UP_SQL = "select count(distinct worker_id) from ilr.worker_deployments where worker_id like 'ti%'"
"""How many bench ilr_workers have registered (``prove.bench.tasks_workers``)."""

HISTORY_STEP_COUNT = "select count(*) as n from ilr.steps where workflow_id = %s"
"""How many step rows a workflow has recorded: the seeding of ``prove.bench.history`` is done."""

HISTORY_TAKEOVER_CLAIM = (
    "select extract(epoch from claimed_at)::float8 as claimed_at_epoch, prev_status from ilr.claims "
    "where workflow_id = %s and owner = %s order by claimed_at limit 1"
)
"""The takeover claim of ``prove.bench.history``: its time in epoch seconds and the status it
took the workflow from ('running': a lapsed lease)."""

# -- ilr.schedules, ilr.schedule_ticks (prove.bench.schedules) -------------------------------------

SCHED_BENCH_COMMITS = "select xact_commit, now() as now from pg_stat_database where datname = current_database()"
"""Commits of the bench database so far (``prove.bench.schedules``: per tick, before and after)."""

SCHED_BENCH_PAUSE_ALL = "update ilr.schedules set paused = true"
"""Stop every bench schedule at the end of the window (``prove.bench.schedules``)."""

SCHED_BENCH_TICKS = (
    "select t.schedule_id, t.scheduled_at, t.outcome, t.workflow_id, extract(epoch from w.created_at - "
    "t.scheduled_at)::float8 as late from ilr.schedule_ticks t left join ilr.workflows w on w.id = t.workflow_id "
    "order by t.schedule_id, t.scheduled_at"
)
"""Every tick with its lateness: its workflow row's insert after its tick, on the database clock."""

SCHED_BENCH_WORKFLOWS = "select count(*) as n from ilr.workflows where id like 'sched:%%'"
"""How many tick workflows exist (one per started tick, or a tick ran twice)."""

# -- bench_agent_tools ------------------------------------------------------------------------------

AGENT_TOOLS_REQUEST_GAP = (
    "select extract(epoch from max(started_at) - min(started_at))::float8 as s, count(*) as n "
    "from ilr.llm_calls where workflow_id = %s"
)
"""The time between a workflow's first and last model request (database clock; the tool call the
first response asked for runs in between) and how many there were (``prove.bench.agent_tools``)."""

AGENT_TOOLS_COMMITTED_EFFECTS = "select count(*) as n from ilr.effects where state = 'committed'"
"""How many effects the bench committed: one per gated run, or a gated figure measured a refusal
(``prove.bench.agent_tools``)."""
