# Workflow priority: the column and its partial index, from ilr/sql/migrations/0015_workflow_priority.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0014_receipt_integrity"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0015_workflow_priority.sql",
                reverse_sql="drop index if exists ilr.wf_due_priority; "
                            "alter table ilr.workflows drop constraint if exists workflows_priority_range; "
                            "alter table ilr.workflows drop column if exists priority")],
            state_operations=[
                migrations.AddField("workflow", "priority", models.SmallIntegerField(default=0)),
            ],
        ),
    ]
