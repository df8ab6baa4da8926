"""Flow control: paused queues (QueueState), the FlowKey rows that serialise decisions on
one key, and the job's unique and concurrency keys, with a unique index on the active unique
key and an index of the jobs waiting on a concurrency key (partial where the database has
partial indexes)."""

import django.utils.timezone
import django_sqlqueue.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_sqlqueue", "0007_rollups"),
    ]

    operations = [
        migrations.CreateModel(
            name="FlowKey",
            fields=[
                ("key", models.CharField(max_length=255, primary_key=True, serialize=False)),
                ("job_id", models.BigIntegerField(blank=True, null=True)),
                ("until", models.DateTimeField(blank=True, null=True)),
                ("starts", models.JSONField(blank=True, default=list)),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
            ],
        ),
        migrations.CreateModel(
            name="QueueState",
            fields=[
                (
                    "queue",
                    models.CharField(
                        max_length=100, primary_key=True, serialize=False, verbose_name="queue"
                    ),
                ),
                ("paused_at", models.DateTimeField(blank=True, null=True, verbose_name="paused")),
                (
                    "paused_by",
                    models.CharField(
                        blank=True, default="", max_length=150, verbose_name="paused by"
                    ),
                ),
                (
                    "reason",
                    models.CharField(blank=True, default="", max_length=255, verbose_name="reason"),
                ),
                (
                    "updated_at",
                    models.DateTimeField(default=django.utils.timezone.now, verbose_name="updated"),
                ),
            ],
            options={
                "verbose_name": "queue",
                "verbose_name_plural": "queues",
                "ordering": ["queue"],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="concurrency_key",
            field=models.CharField(
                blank=True, max_length=200, null=True, verbose_name="concurrency key"
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="unique_key",
            field=models.CharField(blank=True, max_length=64, null=True, verbose_name="unique key"),
        ),
        migrations.AddIndex(
            model_name="job",
            index=django_sqlqueue.models.PartialIndex(
                condition=models.Q(("concurrency_key__isnull", False), ("status", "pending")),
                fallback=(),
                fields=["concurrency_key", "run_at", "id"],
                name="sqlqueue_concurrency_wait",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="unique_active",
            field=models.GeneratedField(
                db_persist=True,
                expression=models.Case(
                    models.When(
                        models.Q(("status__in", ["pending", "failed", "running"])),
                        then=models.F("unique_key"),
                    ),
                    default=models.Value(None),
                    output_field=models.CharField(max_length=64, null=True),
                ),
                output_field=models.CharField(max_length=64, null=True),
            ),
        ),
        migrations.AddConstraint(
            model_name="job",
            constraint=django_sqlqueue.models.PartialUniqueConstraint(
                condition=models.Q(("unique_active__isnull", False)),
                fields=("unique_active",),
                name="sqlqueue_unique_active",
            ),
        ),
    ]
