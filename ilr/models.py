"""Django models over the ilr.* tables, for admin and reporting only.

The schema is owned by ilr/sql (docs/protocol.md §2), applied by migration 0001; these models are
``managed = False`` and their manager refuses writes through the ORM, so every write goes
through the runtime's fenced transactions or its transaction bodies (approve_in, revoke_in,
signal_in, cancel_in). Tables in the ilr schema are named with the quoting trick
``'ilr"."workflows'`` so Django's own tables stay in public.
"""

from __future__ import annotations

from django.db import models

from ilr._statuses import STATUSES as WORKFLOW_STATUSES


class ReadOnlyQuerySet(models.QuerySet):
    """Refuses ORM writes: the runtime's SQL is the only writer of ilr.* tables."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("ilr tables are written by the runtime only (ilr.Runtime), not the ORM")

    update = delete = bulk_create = bulk_update = create = get_or_create = update_or_create = _refuse


class ReadOnlyModel(models.Model):
    objects = ReadOnlyQuerySet.as_manager()

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        raise TypeError("ilr tables are written by the runtime only (ilr.Runtime), not the ORM")

    def delete(self, *args, **kwargs):
        raise TypeError("ilr tables are written by the runtime only (ilr.Runtime), not the ORM")


class TimestampText(models.TextField):
    """A timestamptz column read as text, because it may hold 'infinity' (a workflow waiting
    with no timeout), which no datetime can represent: the SELECT casts it."""

    def select_format(self, compiler, sql, params):
        return f"({sql})::text", params


class Deployment(ReadOnlyModel):
    pk = models.CompositePrimaryKey("name", "version")
    name = models.TextField()
    version = models.TextField()
    code_sha256 = models.TextField()
    created_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."deployments'

    def __str__(self):
        return f"{self.name}@{self.version}"


class WorkerDeployment(ReadOnlyModel):
    """A worker's heartbeat for one (name, version) it serves: live while live_until > now()."""

    pk = models.CompositePrimaryKey("worker_id", "name", "version")
    worker_id = models.TextField()
    name = models.TextField()
    version = models.TextField()
    seen_at = models.DateTimeField()
    live_until = models.DateTimeField()

    class Meta:
        managed = False
        db_table = 'ilr"."worker_deployments'

    def __str__(self):
        return f"{self.worker_id}: {self.name}@{self.version}"


class Workflow(ReadOnlyModel):
    STATUSES = list(WORKFLOW_STATUSES)

    id = models.TextField(primary_key=True)
    name = models.TextField()
    version = models.TextField()
    input = models.JSONField()
    status = models.TextField(choices=[(s, s) for s in STATUSES])
    epoch = models.BigIntegerField()
    owner = models.TextField(null=True)
    lease_expires_at = models.DateTimeField(null=True)
    takeovers = models.IntegerField()
    # 'infinity' while waiting with no timeout: a text column in this model, because
    # datetime cannot hold infinity.
    available_at = TimestampText()
    waiting = models.JSONField(null=True)
    cancel_requested_at = models.DateTimeField(null=True)
    cancel_requested_by = models.TextField(null=True)
    resumed_by = models.TextField(null=True)
    resumed_at = models.DateTimeField(null=True)
    priority = models.SmallIntegerField(default=0)
    concurrency_key = models.TextField(null=True)
    concurrency_limit = models.SmallIntegerField(null=True)
    holds_locks = models.BooleanField(default=False)
    dedup_key = models.TextField(null=True)
    parent_close_policy = models.TextField(null=True)
    trace_context = models.TextField(null=True)
    queue = models.TextField(null=True)
    queue_limit = models.SmallIntegerField(null=True)
    queue_rates = models.JSONField(null=True)
    result = models.JSONField(null=True)
    error = models.JSONField(null=True)
    parent_id = models.TextField(null=True)
    continued_from = models.TextField(null=True)
    forked_from = models.TextField(null=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = 'ilr"."workflows'

    def __str__(self):
        return self.id


class Step(ReadOnlyModel):
    pk = models.CompositePrimaryKey("workflow_id", "seq")
    workflow = models.ForeignKey(Workflow, models.DO_NOTHING, db_column="workflow_id", related_name="steps")
    seq = models.IntegerField()
    name = models.TextField()
    kind = models.TextField()
    fingerprint = models.TextField(null=True)
    output = models.JSONField(null=True)
    error = models.JSONField(null=True)
    epoch = models.BigIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = 'ilr"."steps'


class LlmCall(ReadOnlyModel):
    id = models.BigAutoField(primary_key=True)
    workflow_id = models.TextField()
    seq = models.IntegerField()
    epoch = models.BigIntegerField()
    request_hash = models.TextField()
    started_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = 'ilr"."llm_calls'


class Signal(ReadOnlyModel):
    id = models.BigAutoField(primary_key=True)
    workflow = models.ForeignKey(Workflow, models.DO_NOTHING, db_column="workflow_id", related_name="signals")
    name = models.TextField()
    payload = models.JSONField()
    sender = models.TextField(null=True)
    consumed_seq = models.IntegerField(null=True)
    created_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = 'ilr"."signals'


class Grant(ReadOnlyModel):
    id = models.TextField(primary_key=True)
    principal = models.TextField()
    action = models.TextField()
    max_cents = models.BigIntegerField(null=True)
    payload_hash = models.TextField(null=True)
    facts_seen = models.JSONField(null=True)
    granted_by = models.TextField()
    expires_at = models.DateTimeField(null=True)
    revoked_at = models.DateTimeField(null=True)
    revoked_by = models.TextField(null=True)
    created_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = 'ilr"."grants'


class Slot(ReadOnlyModel):
    """A workflow's place under a concurrency key: a holder (``slot_no`` set) or a waiter, live
    until ``released_at`` (docs/protocol.md §5.4)."""

    id = models.BigAutoField(primary_key=True)
    key = models.TextField()
    workflow = models.ForeignKey(Workflow, models.DO_NOTHING, db_column="workflow_id", related_name="slots")
    slot_limit = models.SmallIntegerField()
    slot_no = models.SmallIntegerField(null=True)
    priority = models.SmallIntegerField(default=0)
    queued_at = models.DateTimeField()
    acquired_at = models.DateTimeField(null=True)
    released_at = models.DateTimeField(null=True)
    released_why = models.TextField(null=True)
    not_before = models.DateTimeField(null=True)
    deferred_until = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."slots'

    def __str__(self):
        return f"{self.key} #{self.slot_no}" if self.slot_no is not None else f"{self.key} (waiting)"


class ApprovalRequest(ReadOnlyModel):
    """A workflow's request that a person approve one exact effect (``ctx.request_approval``)."""

    id = models.TextField(primary_key=True)
    workflow = models.ForeignKey(Workflow, models.DO_NOTHING, db_column="workflow_id", related_name="approval_requests")
    seq = models.IntegerField()
    target = models.TextField()
    action = models.TextField()
    effect_key = models.TextField()
    payload = models.JSONField()
    payload_hash = models.TextField()
    amount_cents = models.BigIntegerField(null=True)
    premises = models.JSONField(null=True)
    decision = models.JSONField(null=True)
    summary = models.TextField()
    approvals_needed = models.IntegerField()
    approvals = models.JSONField()
    status = models.TextField()
    grant = models.ForeignKey(Grant, models.DO_NOTHING, db_column="grant_id", null=True)
    decided_by = models.TextField(null=True)
    reason = models.TextField(null=True)
    requested_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."approval_requests'


class Effect(ReadOnlyModel):
    effect_id = models.TextField(primary_key=True)
    workflow = models.ForeignKey(Workflow, models.DO_NOTHING, db_column="workflow_id", related_name="effects")
    target = models.TextField()
    tier = models.SmallIntegerField()
    payload = models.JSONField()
    payload_hash = models.TextField()
    state = models.TextField()
    grant = models.ForeignKey(Grant, models.DO_NOTHING, db_column="grant_id", null=True)
    dispatch_workflow_id = models.TextField(null=True)
    dispatch_epoch = models.BigIntegerField(null=True)
    first_dispatched_at = models.DateTimeField(null=True)
    send_deadline = models.DateTimeField(null=True)
    settle_margin = models.DurationField(null=True)
    sends = models.IntegerField()
    late_result = models.JSONField(null=True)
    reconciled = models.JSONField(null=True)
    last_error = models.JSONField(null=True)
    next_attempt_at = models.DateTimeField(null=True)
    head_hash = models.TextField(null=True)
    head_n = models.IntegerField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."effects'


class JournalEntry(ReadOnlyModel):
    seq = models.BigAutoField(primary_key=True)
    effect = models.ForeignKey(Effect, models.DO_NOTHING, db_column="effect_id", related_name="journal")
    kind = models.TextField()
    body = models.TextField()
    prev = models.TextField(null=True)
    hash = models.TextField()
    n = models.IntegerField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."journal'
        verbose_name_plural = "journal entries"


class Claim(ReadOnlyModel):
    pk = models.CompositePrimaryKey("workflow_id", "epoch")
    workflow = models.ForeignKey(Workflow, models.DO_NOTHING, db_column="workflow_id", related_name="claims")
    epoch = models.BigIntegerField()
    owner = models.TextField()
    version = models.TextField()
    claimed_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()
    prev_status = models.TextField()
    prev_lease_expires_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."claims'


class Response(ReadOnlyModel):
    id = models.BigAutoField(primary_key=True)
    effect_id = models.TextField()
    workflow_id = models.TextField()
    epoch = models.BigIntegerField()
    result = models.JSONField(null=True)
    received_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = 'ilr"."responses'


class Schedule(ReadOnlyModel):
    """A schedule: a workflow started per tick of a cron or interval spec (docs/protocol.md §5.8);
    written through ``rt.schedule`` and its siblings only."""

    id = models.TextField(primary_key=True)
    workflow_name = models.TextField()
    workflow_version = models.TextField(null=True)
    input = models.JSONField()
    cron = models.TextField(null=True)
    every_s = models.FloatField(null=True)
    timezone = models.TextField(default="UTC")
    jitter_s = models.FloatField(default=0)
    start_at = models.DateTimeField(null=True)
    end_at = models.DateTimeField(null=True)
    overlap = models.TextField(default="skip")
    catchup_window_s = models.FloatField(default=60)
    pause_on_failure = models.BooleanField(default=False)
    paused = models.BooleanField(default=False)
    note = models.TextField(null=True)
    next_tick_at = models.DateTimeField(null=True)
    next_fire_at = models.DateTimeField(null=True)
    buffered = models.IntegerField(default=0)
    source = models.TextField(default="api")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    ticks_pruned_through = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."schedules'

    def __str__(self):
        return self.id


class ScheduleTick(ReadOnlyModel):
    """One tick a schedule met and what it did: started, buffered, skipped or missed."""

    id = models.BigAutoField(primary_key=True)
    schedule = models.ForeignKey(Schedule, models.DO_NOTHING, db_column="schedule_id", related_name="ticks")
    scheduled_at = models.DateTimeField()
    kind = models.TextField()
    overlap = models.TextField(null=True)
    outcome = models.TextField()
    reason = models.TextField(null=True)
    workflow_id = models.TextField(null=True)
    open = models.BooleanField(default=False)
    final_status = models.TextField(null=True)
    recorded_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True)

    class Meta:
        managed = False
        db_table = 'ilr"."schedule_ticks'

    def __str__(self):
        return f"{self.schedule_id} {self.scheduled_at:%Y-%m-%dT%H:%M:%S}Z {self.outcome}"
