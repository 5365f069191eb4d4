# Who revoked a grant, from ilr/sql/migrations/0006_grant_revoked_by.sql.

from django.db import migrations, models

from ilr._db.sql_migrations import RunSQLFile


class Migration(migrations.Migration):

    dependencies = [
        ("ilr", "0005_journal_tail"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[RunSQLFile(
                "0006_grant_revoked_by.sql",
                reverse_sql="alter table ilr.grants drop constraint if exists grants_revoked_by_with_revoked_at; "
                            "alter table ilr.grants drop column if exists revoked_by")],
            state_operations=[migrations.AddField("grant", "revoked_by", models.TextField(null=True))],
        ),
    ]
