# The operations figures' partial indexes, from ilr/sql/migrations/0022_figures_indexes.sql.

from django.db import migrations

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):
    dependencies = [
        ("ilr", "0021_schedule_tick_retention"),
    ]

    operations = [
        RunSQLFile(
            "0022_figures_indexes.sql",
            reverse_sql="drop index if exists ilr.wf_stuck; drop index if exists ilr.effects_ambiguous",
        )
    ]
