"""Public references that are never reused: the job's `ref_nonce` (references.py).

A nullable column with no default: adding it rewrites no row on PostgreSQL, MariaDB or
SQLite, and the jobs already stored keep their old references (their id alone)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_sqlqueue", "0010_batches"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="ref_nonce",
            field=models.BigIntegerField(
                blank=True, editable=False, null=True, verbose_name="reference nonce"
            ),
        ),
    ]
