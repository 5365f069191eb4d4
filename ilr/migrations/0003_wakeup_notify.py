# The wakeup trigger from ilr/sql/migrations/0003_wakeup_notify.sql (issue 9: LISTEN/NOTIFY).

from django.db import migrations

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0002_journal_verbose_name"),
    ]

    operations = [
        RunSQLFile("0003_wakeup_notify.sql", reverse_sql=(
            "drop trigger if exists workflows_claimable on ilr.workflows; "
            "drop function if exists ilr.notify_claimable()")),
    ]
