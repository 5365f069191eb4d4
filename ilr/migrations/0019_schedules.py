# Schedules: ilr.schedules and ilr.schedule_ticks, from ilr/sql/migrations/0019_schedules.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0018_rate_before_queue_slot"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0019_schedules.sql",
                reverse_sql="drop table if exists ilr.schedule_ticks; drop table if exists ilr.schedules")],
            state_operations=[
                migrations.CreateModel(
                    name="Schedule",
                    fields=[
                        ("id", models.TextField(primary_key=True, serialize=False)),
                        ("workflow_name", models.TextField()),
                        ("workflow_version", models.TextField(null=True)),
                        ("input", models.JSONField()),
                        ("cron", models.TextField(null=True)),
                        ("every_s", models.FloatField(null=True)),
                        ("timezone", models.TextField(default="UTC")),
                        ("jitter_s", models.FloatField(default=0)),
                        ("start_at", models.DateTimeField(null=True)),
                        ("end_at", models.DateTimeField(null=True)),
                        ("overlap", models.TextField(default="skip")),
                        ("catchup_window_s", models.FloatField(default=60)),
                        ("pause_on_failure", models.BooleanField(default=False)),
                        ("paused", models.BooleanField(default=False)),
                        ("note", models.TextField(null=True)),
                        ("next_tick_at", models.DateTimeField(null=True)),
                        ("next_fire_at", models.DateTimeField(null=True)),
                        ("buffered", models.IntegerField(default=0)),
                        ("source", models.TextField(default="api")),
                        ("created_at", models.DateTimeField()),
                        ("updated_at", models.DateTimeField()),
                    ],
                    options={"db_table": 'ilr"."schedules', "managed": False},
                ),
                migrations.CreateModel(
                    name="ScheduleTick",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("schedule", models.ForeignKey(
                            db_column="schedule_id", on_delete=models.DO_NOTHING,
                            related_name="ticks", to="ilr.schedule")),
                        ("scheduled_at", models.DateTimeField()),
                        ("kind", models.TextField()),
                        ("overlap", models.TextField(null=True)),
                        ("outcome", models.TextField()),
                        ("reason", models.TextField(null=True)),
                        ("workflow_id", models.TextField(null=True)),
                        ("open", models.BooleanField(default=False)),
                        ("final_status", models.TextField(null=True)),
                        ("recorded_at", models.DateTimeField()),
                        ("started_at", models.DateTimeField(null=True)),
                    ],
                    options={"db_table": 'ilr"."schedule_ticks', "managed": False},
                ),
            ],
        ),
    ]
