# Lifecycle: the 'terminated' status and a child's parent close policy, from
# ilr/sql/migrations/0017_lifecycle.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0016_concurrency_slots"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0017_lifecycle.sql",
                reverse_sql="drop index if exists ilr.wf_children; "
                            "alter table ilr.workflows drop constraint if exists workflows_parent_close_policy; "
                            "alter table ilr.workflows drop column if exists parent_close_policy; "
                            "alter table ilr.workflows drop constraint if exists workflows_status_check; "
                            "alter table ilr.workflows add constraint workflows_status_check check (status in "
                            "('pending','running','sleeping','completed','failed','cancelled','stuck','continued'))")],
            state_operations=[
                migrations.AddField("workflow", "parent_close_policy", models.TextField(null=True)),
            ],
        ),
    ]
