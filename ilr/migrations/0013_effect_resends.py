# Resends that back off, and the RESENT journal kind, from ilr/sql/migrations/0013_effect_resends.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0012_case_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0013_effect_resends.sql",
                reverse_sql="alter table ilr.journal drop constraint if exists journal_kind_check; "
                            "alter table ilr.journal add constraint journal_kind_check check (kind in ("
                            "'PROPOSED','AUTHORIZED','DISPATCHED','COMMITTED','REFUSED','AMBIGUOUS','LATE_RESULT')); "
                            "alter table ilr.effects drop column if exists next_attempt_at; "
                            "alter table ilr.effects drop column if exists last_error")],
            state_operations=[
                migrations.AddField("effect", "last_error", models.JSONField(null=True)),
                migrations.AddField("effect", "next_attempt_at", models.DateTimeField(null=True)),
            ],
        ),
    ]
