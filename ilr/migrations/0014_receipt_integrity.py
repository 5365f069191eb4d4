# A receipt's integrity: entry positions, the effect's chain head and RECONCILED, from
# ilr/sql/migrations/0014_receipt_integrity.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0013_effect_resends"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0014_receipt_integrity.sql",
                reverse_sql="drop index if exists ilr.one_reconcile; "
                            "alter table ilr.journal drop constraint if exists journal_kind_check; "
                            "alter table ilr.journal add constraint journal_kind_check check (kind in ("
                            "'PROPOSED','AUTHORIZED','DISPATCHED','RESENT','COMMITTED','REFUSED','AMBIGUOUS',"
                            "'LATE_RESULT')); "
                            "drop trigger if exists journal_head on ilr.journal; "
                            "drop function if exists ilr.journal_head(); "
                            "alter table ilr.effects drop column if exists head_n; "
                            "alter table ilr.effects drop column if exists head_hash; "
                            "alter table ilr.journal drop column if exists n")],
            state_operations=[
                migrations.AddField("effect", "head_hash", models.TextField(null=True)),
                migrations.AddField("effect", "head_n", models.IntegerField(null=True)),
                migrations.AddField("journalentry", "n", models.IntegerField(null=True)),
            ],
        ),
    ]
