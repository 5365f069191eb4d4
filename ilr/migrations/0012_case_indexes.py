# Indexes for the case list and the receipt page, from ilr/sql/migrations/0012_case_indexes.sql.

from django.db import migrations

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0011_approval_requests"),
    ]

    operations = [
        RunSQLFile("0012_case_indexes.sql", reverse_sql=(
            "drop index if exists ilr.effects_by_workflow; "
            "drop index if exists ilr.approval_requests_by_grant")),
    ]
