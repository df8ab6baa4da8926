"""The chaos app's side tables, and the one counter row the atomic jobs increment."""

from django.db import migrations, models


def create_atomic_counter(apps, schema_editor):
    Counter = apps.get_model("chaos", "Counter")
    Counter.objects.using(schema_editor.connection.alias).create(name="atomic", value=0)


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="Counter",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=32, unique=True)),
                ("value", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="Execution",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("call", models.CharField(max_length=32, unique=True)),
                ("job_id", models.BigIntegerField(db_index=True)),
                ("token", models.CharField(max_length=64)),
                ("kind", models.CharField(max_length=16)),
                ("attempt", models.PositiveIntegerField()),
                ("worker_pid", models.PositiveIntegerField()),
                ("worker_id", models.CharField(max_length=100)),
                ("started", models.FloatField()),
                ("finished", models.FloatField(null=True)),
            ],
        ),
        migrations.CreateModel(
            name="Order",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("tx", models.CharField(max_length=64, unique=True)),
            ],
        ),
        migrations.RunPython(create_atomic_counter, migrations.RunPython.noop),
    ]
