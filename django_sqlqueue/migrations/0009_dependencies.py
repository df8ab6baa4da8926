"""Workflows: the `waiting` status, the JobDependency edges (which job waits for which, and
whether that one has finished), and the job's `has_dependents` mark that tells its worker to
release the jobs waiting for it."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_sqlqueue", "0008_flow_control"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="has_dependents",
            field=models.BooleanField(
                db_default=False, default=False, editable=False, verbose_name="has dependents"
            ),
        ),
        migrations.AlterField(
            model_name="job",
            name="status",
            field=models.CharField(
                choices=[
                    ("waiting", "Waiting for dependencies"),
                    ("pending", "Pending"),
                    ("running", "Running"),
                    ("completed", "Completed"),
                    ("failed", "Failed (retry scheduled)"),
                    ("dead", "Dead"),
                    ("cancelled", "Cancelled"),
                ],
                default="pending",
                max_length=16,
                verbose_name="status",
            ),
        ),
        migrations.CreateModel(
            name="JobDependency",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                (
                    "run_on_failure",
                    models.BooleanField(default=False, verbose_name="runs if it fails"),
                ),
                ("done", models.BooleanField(default=False, verbose_name="done")),
                (
                    "depends_on",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="dependent_links",
                        to="django_sqlqueue.job",
                        verbose_name="depends on",
                    ),
                ),
                (
                    "job",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="dependency_links",
                        to="django_sqlqueue.job",
                        verbose_name="job",
                    ),
                ),
            ],
            options={
                "verbose_name": "job dependency",
                "verbose_name_plural": "job dependencies",
                "indexes": [
                    models.Index(fields=["job", "done"], name="sqlqueue_dependency_left"),
                    models.Index(fields=["done", "id"], name="sqlqueue_dependency_undone"),
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("job", "depends_on"), name="sqlqueue_dependency_once"
                    )
                ],
            },
        ),
    ]
