# Flow control (concurrency keys, queues, ctx.lock, deduplication): the workflow columns, ilr.slots and its functions and triggers, from
# ilr/sql/migrations/0016_concurrency_slots.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0015_workflow_priority"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0016_concurrency_slots.sql",
                reverse_sql="drop trigger if exists workflows_claimable_insert on ilr.workflows; "
                            "create or replace trigger workflows_claimable after insert or update of status, "
                            "available_at on ilr.workflows for each row when (new.status in ('pending', "
                            "'sleeping') and new.available_at <= now()) execute function ilr.notify_claimable(); "
                            "drop trigger if exists workflows_slots_insert on ilr.workflows; "
                            "drop trigger if exists workflows_slots_status on ilr.workflows; "
                            "drop function if exists ilr.workflows_slots(); "
                            "drop function if exists ilr.slot_carry(text, text, text); "
                            "drop function if exists ilr.slot_unlock(text, text, text); "
                            "drop function if exists ilr.slot_take(text, text, smallint, smallint); "
                            "drop function if exists ilr.slot_release(text, text); "
                            "drop function if exists ilr.slot_acquire(text); "
                            "drop function if exists ilr.rate_next(text, jsonb); "
                            "drop function if exists ilr.slot_admit(text, smallint); "
                            "drop function if exists ilr.slot_notify(text); "
                            "drop function if exists ilr.slot_lock(text); "
                            "drop table if exists ilr.slots; "
                            "alter table ilr.workflows drop constraint if exists workflows_concurrency; "
                            "alter table ilr.workflows drop column if exists concurrency_limit; "
                            "alter table ilr.workflows drop column if exists concurrency_key; "
                            "alter table ilr.workflows drop column if exists holds_locks; "
                            "drop index if exists ilr.wf_dedup; "
                            "alter table ilr.workflows drop constraint if exists workflows_queue; "
                            "alter table ilr.workflows drop column if exists queue; "
                            "alter table ilr.workflows drop column if exists queue_limit; "
                            "alter table ilr.workflows drop column if exists queue_rates; "
                            "alter table ilr.workflows drop column if exists dedup_key; "
                            "alter table ilr.steps drop constraint if exists steps_kind_check; "
                            "alter table ilr.steps add constraint steps_kind_check check (kind in "
                            "('step','decide','effect','sleep','signal','patch','child'))")],
            state_operations=[
                migrations.AddField("workflow", "concurrency_key", models.TextField(null=True)),
                migrations.AddField("workflow", "concurrency_limit", models.SmallIntegerField(null=True)),
                migrations.AddField("workflow", "holds_locks", models.BooleanField(default=False)),
                migrations.AddField("workflow", "dedup_key", models.TextField(null=True)),
                migrations.AddField("workflow", "queue", models.TextField(null=True)),
                migrations.AddField("workflow", "queue_limit", models.SmallIntegerField(null=True)),
                migrations.AddField("workflow", "queue_rates", models.JSONField(null=True)),
                migrations.CreateModel(
                    name="Slot",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("key", models.TextField()),
                        ("workflow", models.ForeignKey(
                            db_column="workflow_id", on_delete=models.DO_NOTHING,
                            related_name="slots", to="ilr.workflow")),
                        ("slot_limit", models.SmallIntegerField()),
                        ("slot_no", models.SmallIntegerField(null=True)),
                        ("priority", models.SmallIntegerField(default=0)),
                        ("queued_at", models.DateTimeField()),
                        ("acquired_at", models.DateTimeField(null=True)),
                        ("released_at", models.DateTimeField(null=True)),
                        ("released_why", models.TextField(null=True)),
                        ("not_before", models.DateTimeField(null=True)),
                    ],
                    options={"db_table": 'ilr"."slots', "managed": False},
                ),
            ],
        ),
    ]
