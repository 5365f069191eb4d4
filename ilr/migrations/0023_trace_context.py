# The workflow's trace context column, from ilr/sql/migrations/0023_trace_context.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("ilr", "0022_figures_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                RunSQLFile(
                    "0023_trace_context.sql",
                    reverse_sql="alter table ilr.workflows drop column if exists trace_context",
                )
            ],
            state_operations=[migrations.AddField("workflow", "trace_context", models.TextField(null=True))],
        ),
    ]
