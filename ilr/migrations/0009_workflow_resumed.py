# Who last resumed a stuck workflow, and when, from ilr/sql/migrations/0009_workflow_resumed.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0008_worker_deployments"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0009_workflow_resumed.sql",
                reverse_sql="alter table ilr.workflows drop constraint if exists workflows_resumed_by_with_at; "
                            "alter table ilr.workflows drop column if exists resumed_at; "
                            "alter table ilr.workflows drop column if exists resumed_by")],
            state_operations=[
                migrations.AddField("workflow", "resumed_by", models.TextField(null=True)),
                migrations.AddField("workflow", "resumed_at", models.DateTimeField(null=True)),
            ],
        ),
    ]
