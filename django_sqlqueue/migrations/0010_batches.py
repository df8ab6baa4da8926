"""Workflows: batches (`JobBatch`), the job's `batch` and the index of a batch's members by
status that answers "anything left?"."""

import django.db.models.deletion
import django.utils.timezone
import django_sqlqueue.models
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_sqlqueue", "0009_dependencies"),
    ]

    operations = [
        migrations.CreateModel(
            name="JobBatch",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False, verbose_name="ID")),
                ("label", models.CharField(blank=True, max_length=200, verbose_name="label")),
                (
                    "created_at",
                    models.DateTimeField(default=django.utils.timezone.now, verbose_name="created"),
                ),
                ("closed_at", models.DateTimeField(blank=True, null=True, verbose_name="closed")),
                (
                    "finished_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="finished"),
                ),
                (
                    "cancelled_at",
                    models.DateTimeField(blank=True, null=True, verbose_name="cancelled"),
                ),
                ("callback", models.JSONField(blank=True, null=True, verbose_name="callback")),
                (
                    "callback_job",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="django_sqlqueue.job",
                        verbose_name="callback job",
                    ),
                ),
                (
                    "parent",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="children",
                        to="django_sqlqueue.jobbatch",
                        verbose_name="parent batch",
                    ),
                ),
            ],
            options={
                "verbose_name": "batch",
                "verbose_name_plural": "batches",
                "ordering": ["-id"],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="batch",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="members",
                to="django_sqlqueue.jobbatch",
                verbose_name="batch",
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=django_sqlqueue.models.PartialIndex(
                condition=models.Q(("batch__isnull", False)),
                fallback=(),
                fields=["batch", "status"],
                name="sqlqueue_batch_members",
            ),
        ),
        migrations.AddIndex(
            model_name="jobbatch",
            index=models.Index(
                fields=["finished_at", "closed_at", "id"], name="sqlqueue_batch_open"
            ),
        ),
        migrations.AddIndex(
            model_name="jobbatch",
            index=models.Index(fields=["parent", "finished_at"], name="sqlqueue_batch_children"),
        ),
    ]
