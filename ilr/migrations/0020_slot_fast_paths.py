# Fast paths of the slot functions, behaviour unchanged, from ilr/sql/migrations/0020_slot_fast_paths.sql.

from django.db import migrations

from ilr._db.sql_migrations import SQL_DIR, RunSQLFile

# Backwards: 0016's trigger and 0018's functions again (every statement in them is idempotent).
BACK = [
    "drop trigger if exists workflows_slots_status on ilr.workflows",
    *((SQL_DIR / "migrations" / name).read_text() for name in ("0016_concurrency_slots.sql", "0017_lifecycle.sql",
                                                               "0018_rate_before_queue_slot.sql")),
]


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0019_schedules"),
    ]

    operations = [RunSQLFile("0020_slot_fast_paths.sql", reverse_sql=BACK)]
