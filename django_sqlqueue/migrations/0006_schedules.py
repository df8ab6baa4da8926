"""Recurring jobs: one row per schedule declared in code or settings (docs/schedules.md).

On MySQL/MariaDB the key compares exactly (binary, no pad), as the job table's idempotency
keys do since 0003: `Nightly` and `nightly` are two schedules, as on PostgreSQL and SQLite."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


def exact_key_comparison(apps, schema_editor):
    connection = schema_editor.connection
    if connection.vendor != "mysql":
        return
    collation = "utf8mb4_nopad_bin" if connection.mysql_is_mariadb else "utf8mb4_0900_bin"
    quote = schema_editor.quote_name
    schema_editor.execute(
        f"ALTER TABLE {quote('django_sqlqueue_schedule')} MODIFY {quote('key')} varchar(200) "
        f"CHARACTER SET utf8mb4 COLLATE {collation} NOT NULL"
    )


class Migration(migrations.Migration):
    # DDL cannot run inside a transaction on MySQL.
    atomic = False

    dependencies = [
        ('django_sqlqueue', '0005_verbose_names'),
    ]

    operations = [
        migrations.CreateModel(
            name='Schedule',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(help_text='The SCHEDULES key, or the job name for a schedule declared on @job.', max_length=200, unique=True, verbose_name='key')),
                ('job_name', models.CharField(max_length=255, verbose_name='job')),
                ('cron', models.CharField(help_text='In force: 5 fields (minute hour day month weekday), or 6 with seconds last.', max_length=200, verbose_name='cron')),
                ('declared_cron', models.CharField(help_text='As code or settings declared it when a supervisor last started.', max_length=200, verbose_name='cron in code')),
                ('kwargs', models.JSONField(blank=True, default=dict, verbose_name='kwargs')),
                ('timezone', models.CharField(default='UTC', max_length=64, verbose_name='time zone')),
                ('queue', models.CharField(blank=True, default='', help_text="Empty: the job's.", max_length=100, verbose_name='queue')),
                ('priority', models.SmallIntegerField(blank=True, help_text="Empty: the job's.", null=True, verbose_name='priority')),
                ('missed', models.CharField(choices=[('latest', 'run the latest missed tick once'), ('skip', 'skip missed ticks'), ('all', 'run every missed tick (up to 100)')], default='latest', max_length=8, verbose_name='missed ticks')),
                ('enabled', models.BooleanField(default=True, verbose_name='enabled')),
                ('source', models.CharField(choices=[('code', '@job decorator'), ('settings', "SQLQUEUE['SCHEDULES']")], max_length=8, verbose_name='declared in')),
                ('removed_at', models.DateTimeField(blank=True, help_text='Set (and the schedule disabled) when code and settings no longer have it.', null=True, verbose_name='removed from code')),
                ('next_run_at', models.DateTimeField(blank=True, help_text='The next tick not yet enqueued.', null=True, verbose_name='next run')),
                ('last_run_at', models.DateTimeField(blank=True, help_text='Run time of the last job enqueued.', null=True, verbose_name='last run')),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='created')),
                ('updated_at', models.DateTimeField(default=django.utils.timezone.now, verbose_name='updated')),
                ('last_job', models.ForeignKey(blank=True, db_constraint=False, db_index=False, null=True, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='django_sqlqueue.job', verbose_name='last job')),
            ],
            options={
                'verbose_name': 'schedule',
                'verbose_name_plural': 'schedules',
                'ordering': ['key'],
            },
        ),
        migrations.RunPython(exact_key_comparison, migrations.RunPython.noop, atomic=False),
    ]
