"""Progress of a running attempt, and cancel requests for running jobs."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("django_sqlqueue", "0003_mysql_binary_collation"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="progress",
            field=models.PositiveSmallIntegerField(
                blank=True,
                help_text="Percent done, as the running attempt last reported.",
                null=True,
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="progress_message",
            field=models.CharField(blank=True, db_default="", default="", max_length=255),
        ),
        migrations.AddField(
            model_name="job",
            name="cancel_requested_at",
            field=models.DateTimeField(
                blank=True,
                help_text="Set when someone cancels the job while it runs.",
                null=True,
            ),
        ),
    ]
