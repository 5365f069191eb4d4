# Approval requests (ctx.request_approval), from ilr/sql/migrations/0011_approval_requests.sql.

import django.db.models.deletion
from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0010_timelines"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0011_approval_requests.sql", reverse_sql="drop table if exists ilr.approval_requests")],
            state_operations=[migrations.CreateModel(
                name="ApprovalRequest",
                fields=[
                    ("id", models.TextField(primary_key=True, serialize=False)),
                    ("workflow", models.ForeignKey(db_column="workflow_id",
                                                   on_delete=django.db.models.deletion.DO_NOTHING,
                                                   related_name="approval_requests", to="ilr.workflow")),
                    ("seq", models.IntegerField()),
                    ("target", models.TextField()),
                    ("action", models.TextField()),
                    ("effect_key", models.TextField()),
                    ("payload", models.JSONField()),
                    ("payload_hash", models.TextField()),
                    ("amount_cents", models.BigIntegerField(null=True)),
                    ("premises", models.JSONField(null=True)),
                    ("decision", models.JSONField(null=True)),
                    ("summary", models.TextField()),
                    ("approvals_needed", models.IntegerField()),
                    ("approvals", models.JSONField()),
                    ("status", models.TextField()),
                    ("grant", models.ForeignKey(db_column="grant_id", null=True,
                                                on_delete=django.db.models.deletion.DO_NOTHING, to="ilr.grant")),
                    ("decided_by", models.TextField(null=True)),
                    ("reason", models.TextField(null=True)),
                    ("requested_at", models.DateTimeField()),
                    ("expires_at", models.DateTimeField()),
                    ("decided_at", models.DateTimeField(null=True)),
                ],
                options={"db_table": 'ilr"."approval_requests', "managed": False},
            )],
        ),
    ]
