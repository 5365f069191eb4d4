# The chain's tail by index, from ilr/sql/migrations/0005_journal_tail.sql (issue 9).

from django.db import migrations

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0004_hot_lease_renewal"),
    ]

    operations = [
        RunSQLFile("0005_journal_tail.sql", reverse_sql="drop index if exists ilr.journal_tail"),
    ]
