# Who requested a workflow's cancel, from ilr/sql/migrations/0007_workflow_cancel_requested_by.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0006_grant_revoked_by"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0007_workflow_cancel_requested_by.sql",
                reverse_sql="alter table ilr.workflows drop constraint if exists workflows_cancel_requested_by_with_at; "
                            "alter table ilr.workflows drop column if exists cancel_requested_by")],
            state_operations=[migrations.AddField("workflow", "cancel_requested_by", models.TextField(null=True))],
        ),
    ]
