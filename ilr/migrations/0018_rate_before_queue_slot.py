# Rates before the queue's slot: a start its concurrency key's per_key_rate puts off holds no slot
# of its queue while it waits (ilr.slots.deferred_until, the sweep ilr.slot_wake), from
# ilr/sql/migrations/0018_rate_before_queue_slot.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import SQL_DIR, RunSQLFile

# Backwards: 0016's and 0017's files again (every statement in them is idempotent), which put
# back their slot_admit, slot_take and slot_acquire, then drop what 0018 added.
BACK = [(SQL_DIR / "migrations" / name).read_text() for name in ("0016_concurrency_slots.sql", "0017_lifecycle.sql")]


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0017_lifecycle"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0018_rate_before_queue_slot.sql",
                reverse_sql=[
                    *BACK,
                    "drop function if exists ilr.slot_wake(); "
                    "drop function if exists ilr.slot_fill(text); "
                    "drop function if exists ilr.slot_defer(text, text, timestamptz); "
                    "drop function if exists ilr.rate_put_off(text); "
                    "drop function if exists ilr.slot_free(text, smallint); "
                    "drop index if exists ilr.slots_deferred; "
                    "alter table ilr.slots drop column if exists deferred_until",
                ],
            )],
            state_operations=[
                migrations.AddField("slot", "deferred_until", models.DateTimeField(null=True)),
            ],
        ),
    ]
