# The WAL timelines the runtime has seen, the epoch floor and the lineage age used after a failover,
# from ilr/sql/migrations/0010_timelines.sql.

from django.db import migrations

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0009_workflow_resumed"),
    ]

    operations = [
        RunSQLFile(
            "0010_timelines.sql",
            reverse_sql="drop function if exists ilr.lineage_created_at(text); "
                        "drop function if exists ilr.next_epoch(bigint); "
                        "drop function if exists ilr.current_timeline(); "
                        "drop table if exists ilr.timelines"),
    ]
