# Which live worker serves each deployment, from ilr/sql/migrations/0008_worker_deployments.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0007_workflow_cancel_requested_by"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0008_worker_deployments.sql", reverse_sql="drop table if exists ilr.worker_deployments")],
            state_operations=[migrations.CreateModel(
                name="WorkerDeployment",
                fields=[
                    ("pk", models.CompositePrimaryKey("worker_id", "name", "version", blank=True, editable=False,
                                                      primary_key=True, serialize=False)),
                    ("worker_id", models.TextField()),
                    ("name", models.TextField()),
                    ("version", models.TextField()),
                    ("seen_at", models.DateTimeField()),
                    ("live_until", models.DateTimeField()),
                ],
                options={
                    "db_table": 'ilr"."worker_deployments',
                    "managed": False,
                },
            )],
        ),
    ]
