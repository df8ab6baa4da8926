"""Translatable names, labels and help texts for the admin: no SQL on any database."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_sqlqueue', '0004_progress_and_cancel_requests'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='job',
            options={'ordering': ['-id'], 'verbose_name': 'job', 'verbose_name_plural': 'jobs'},
        ),
        migrations.AlterModelOptions(
            name='worker',
            options={'ordering': ['hostname', 'pid'], 'verbose_name': 'worker', 'verbose_name_plural': 'workers'},
        ),
        migrations.AlterField(
            model_name='job',
            name='args',
            field=models.JSONField(blank=True, default=list, verbose_name='args'),
        ),
        migrations.AlterField(
            model_name='job',
            name='attempts',
            field=models.PositiveIntegerField(default=0, verbose_name='attempts'),
        ),
        migrations.AlterField(
            model_name='job',
            name='backend',
            field=models.CharField(blank=True, default='', help_text='django.tasks backend alias, if any.', max_length=100, verbose_name='tasks backend'),
        ),
        migrations.AlterField(
            model_name='job',
            name='cancel_requested_at',
            field=models.DateTimeField(blank=True, help_text='Set when someone cancels the job while it runs.', null=True, verbose_name='cancel requested'),
        ),
        migrations.AlterField(
            model_name='job',
            name='created_at',
            field=models.DateTimeField(default=django.utils.timezone.now, verbose_name='created'),
        ),
        migrations.AlterField(
            model_name='job',
            name='finished_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='finished'),
        ),
        migrations.AlterField(
            model_name='job',
            name='history',
            field=models.JSONField(blank=True, default=list, help_text='One entry per attempt: worker, times, outcome.', verbose_name='history'),
        ),
        migrations.AlterField(
            model_name='job',
            name='id',
            field=models.BigAutoField(primary_key=True, serialize=False, verbose_name='ID'),
        ),
        migrations.AlterField(
            model_name='job',
            name='idempotency_key',
            field=models.CharField(blank=True, max_length=255, null=True, unique=True, verbose_name='idempotency key'),
        ),
        migrations.AlterField(
            model_name='job',
            name='kwargs',
            field=models.JSONField(blank=True, default=dict, verbose_name='kwargs'),
        ),
        migrations.AlterField(
            model_name='job',
            name='last_error',
            field=models.TextField(blank=True, default='', verbose_name='last error'),
        ),
        migrations.AlterField(
            model_name='job',
            name='lease_expires_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='lease expires'),
        ),
        migrations.AlterField(
            model_name='job',
            name='lease_owner',
            field=models.CharField(blank=True, default='', max_length=100, verbose_name='lease owner'),
        ),
        migrations.AlterField(
            model_name='job',
            name='max_attempts',
            field=models.PositiveIntegerField(default=5, verbose_name='max attempts'),
        ),
        migrations.AlterField(
            model_name='job',
            name='name',
            field=models.CharField(help_text='Registered job name.', max_length=255, verbose_name='name'),
        ),
        migrations.AlterField(
            model_name='job',
            name='priority',
            field=models.SmallIntegerField(default=0, help_text='Higher runs first.', verbose_name='priority'),
        ),
        migrations.AlterField(
            model_name='job',
            name='progress',
            field=models.PositiveSmallIntegerField(blank=True, help_text='Percent done, as the running attempt last reported.', null=True, verbose_name='progress'),
        ),
        migrations.AlterField(
            model_name='job',
            name='progress_message',
            field=models.CharField(blank=True, db_default='', default='', max_length=255, verbose_name='progress message'),
        ),
        migrations.AlterField(
            model_name='job',
            name='queue',
            field=models.CharField(default='default', max_length=100, verbose_name='queue'),
        ),
        migrations.AlterField(
            model_name='job',
            name='result',
            field=models.JSONField(blank=True, null=True, verbose_name='result'),
        ),
        migrations.AlterField(
            model_name='job',
            name='run_at',
            field=models.DateTimeField(default=django.utils.timezone.now, help_text='Not run before this time.', verbose_name='run at'),
        ),
        migrations.AlterField(
            model_name='job',
            name='started_at',
            field=models.DateTimeField(blank=True, null=True, verbose_name='started'),
        ),
        migrations.AlterField(
            model_name='job',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed (retry scheduled)'), ('dead', 'Dead'), ('cancelled', 'Cancelled')], default='pending', max_length=16, verbose_name='status'),
        ),
        migrations.AlterField(
            model_name='job',
            name='updated_at',
            field=models.DateTimeField(default=django.utils.timezone.now, verbose_name='updated'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='current_job_id',
            field=models.BigIntegerField(blank=True, null=True, verbose_name='current job'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='hostname',
            field=models.CharField(max_length=255, verbose_name='host'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='id',
            field=models.CharField(max_length=100, primary_key=True, serialize=False, verbose_name='ID'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='jobs_done',
            field=models.PositiveIntegerField(default=0, verbose_name='jobs done'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='last_seen_at',
            field=models.DateTimeField(default=django.utils.timezone.now, verbose_name='last heartbeat'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='pid',
            field=models.PositiveIntegerField(verbose_name='PID'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='queues',
            field=models.CharField(blank=True, help_text='Empty: all queues.', max_length=1000, verbose_name='queues'),
        ),
        migrations.AlterField(
            model_name='worker',
            name='started_at',
            field=models.DateTimeField(default=django.utils.timezone.now, verbose_name='started'),
        ),
    ]
