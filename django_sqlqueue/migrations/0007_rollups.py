"""Observability: the per-minute rollup of finished attempts and the queue samples the admin's
dashboard draws, and the trace context an OpenTelemetry-traced enqueue leaves on its job.

On MySQL/MariaDB the rollups' and samples' names and queues compare exactly (binary, no pad),
as the job table's do since 0003, so `Mail` and `mail` stay two queues."""

from django.db import migrations, models

COLUMNS = {
    "django_sqlqueue_jobrollup": {
        "queue": "varchar(100) NOT NULL",
        "name": "varchar(255) NOT NULL",
        "outcome": "varchar(16) NOT NULL",
    },
    "django_sqlqueue_queuesample": {"queue": "varchar(100) NOT NULL"},
}


def exact_comparison(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    collation = "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"
    quote = schema_editor.quote_name
    for table, columns in COLUMNS.items():
        changes = ", ".join(
            f"MODIFY {quote(column)} {type_name} CHARACTER SET utf8mb4 COLLATE {collation} {nullability}"
            for column, (type_name, nullability) in (
                (column, kind.split(" ", 1)) for column, kind in columns.items()
            )
        )
        schema_editor.execute(f"ALTER TABLE {quote(table)} {changes}")


class Migration(migrations.Migration):
    # DDL cannot run inside a transaction on MySQL.
    atomic = False
    dependencies = [
        ("django_sqlqueue", "0006_schedules"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="trace_context",
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.CreateModel(
            name="JobRollup",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("minute", models.DateTimeField(help_text="Start of the minute (UTC) the attempts ended in.")),
                ("queue", models.CharField(max_length=100)),
                ("name", models.CharField(max_length=255)),
                ("outcome", models.CharField(max_length=16)),
                ("count", models.PositiveIntegerField(default=0)),
                ("duration_sum", models.FloatField(default=0.0)),
                ("wait_b0", models.PositiveIntegerField(default=0)),
                ("wait_b1", models.PositiveIntegerField(default=0)),
                ("wait_b2", models.PositiveIntegerField(default=0)),
                ("wait_b3", models.PositiveIntegerField(default=0)),
                ("wait_b4", models.PositiveIntegerField(default=0)),
                ("wait_b5", models.PositiveIntegerField(default=0)),
                ("wait_b6", models.PositiveIntegerField(default=0)),
                ("wait_b7", models.PositiveIntegerField(default=0)),
                ("wait_b8", models.PositiveIntegerField(default=0)),
                ("wait_b9", models.PositiveIntegerField(default=0)),
                ("wait_b10", models.PositiveIntegerField(default=0)),
                ("wait_b11", models.PositiveIntegerField(default=0)),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("minute", "queue", "name", "outcome"), name="sqlqueue_rollup_key")],
            },
        ),
        migrations.CreateModel(
            name="QueueSample",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("minute", models.DateTimeField()),
                ("queue", models.CharField(max_length=100)),
                ("pending", models.PositiveIntegerField(default=0)),
                ("failed", models.PositiveIntegerField(default=0)),
                ("running", models.PositiveIntegerField(default=0)),
                ("oldest_wait", models.FloatField(blank=True, null=True)),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("minute", "queue"), name="sqlqueue_sample_key")],
            },
        ),
        migrations.RunPython(exact_comparison, migrations.RunPython.noop, atomic=False),
    ]
