# HOT lease renewal from ilr/sql/migrations/0004_hot_lease_renewal.sql (issue 9).

from django.db import migrations

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0003_wakeup_notify"),
    ]

    operations = [
        RunSQLFile("0004_hot_lease_renewal.sql", reverse_sql=(
            "drop index if exists ilr.wf_running; "
            "create index if not exists wf_leased on ilr.workflows (lease_expires_at) where status = 'running'; "
            "alter table ilr.workflows reset (fillfactor)")),
    ]
