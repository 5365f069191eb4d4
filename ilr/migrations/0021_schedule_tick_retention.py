# Pruned tick rows: ilr.schedules.ticks_pruned_through, from
# ilr/sql/migrations/0021_schedule_tick_retention.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0020_slot_fast_paths"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0021_schedule_tick_retention.sql",
                reverse_sql="alter table ilr.schedules drop column if exists ticks_pruned_through")],
            state_operations=[
                migrations.AddField(
                    model_name="schedule",
                    name="ticks_pruned_through",
                    field=models.DateTimeField(null=True),
                ),
            ],
        ),
    ]
