"""Fewer index entries per job (issue 27: the per-job cost).

- The idempotency key's unique index becomes partial (`WHERE idempotency_key IS NOT NULL`):
  a job without a key writes no entry in it, at its INSERT nor (PostgreSQL) at its claim and
  its completion. PostgreSQL's `_like` index, which Django adds to every unique varchar, goes
  with it; a partial prefix index (`varchar_pattern_ops`) takes its place for the admin's
  "jobs of this schedule" link, which filters the keys by prefix. MySQL and MariaDB have no
  partial indexes: they keep a plain unique index, as before.
- `sqlqueue_status_finished` becomes partial (`WHERE finished_at IS NOT NULL`): a job enters
  it when it finishes, not at its INSERT and its claim. Every query it serves (purgejobs,
  the admin's finished-date filter) bounds `finished_at`, which implies the condition.

The new unique constraint is added before the old one is dropped, so the key stays unique
throughout. SQLite cannot drop the old index (it belongs to the column's UNIQUE), so Django
rebuilds the job table there: one copy of the table, in the migration's transaction.
"""

from django.db import migrations, models

import django_sqlqueue.models

PREFIX_INDEX = "sqlqueue_idempotency_prefix"


def add_prefix_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    schema_editor.execute(
        f"CREATE INDEX {quote(PREFIX_INDEX)} ON {quote('django_sqlqueue_job')} "
        f"({quote('idempotency_key')} varchar_pattern_ops) "
        f"WHERE {quote('idempotency_key')} IS NOT NULL"
    )


def drop_prefix_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(PREFIX_INDEX)}")


class Migration(migrations.Migration):
    dependencies = [
        ("django_sqlqueue", "0011_reference_nonce"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="job",
            name="sqlqueue_status_finished",
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=django_sqlqueue.models.PartialUniqueConstraint(
                condition=models.Q(("idempotency_key__isnull", False)),
                fields=("idempotency_key",),
                name="sqlqueue_idempotency_key",
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="idempotency_key",
            field=models.CharField(
                blank=True, max_length=255, null=True, verbose_name="idempotency key"
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=django_sqlqueue.models.PartialIndex(
                condition=models.Q(("finished_at__isnull", False)),
                fallback=(),
                fields=["status", "finished_at"],
                name="sqlqueue_status_finished",
            ),
        ),
        migrations.RunPython(add_prefix_index, drop_prefix_index),
    ]
