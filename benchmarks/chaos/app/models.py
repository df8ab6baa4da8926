"""Side tables: what really ran (written by handlers) and what producers really committed.

The app has no migrations: the harness creates these tables with `migrate --run-syncdb` in a
database it made for the run and drops afterwards.
"""

from django.db import models


class Execution(models.Model):
    """One start of a handler, written before its work; `finished` once its body returned
    or raised (never, if its process was killed)."""

    job_id = models.BigIntegerField(db_index=True)
    token = models.CharField(max_length=64)
    kind = models.CharField(max_length=16)
    attempt = models.PositiveIntegerField()
    worker_pid = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=100)
    started = models.FloatField()
    finished = models.FloatField(null=True)

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt} in pid {self.worker_pid}"


class Order(models.Model):
    """A business row written in the same transaction as enqueues: they must agree."""

    tx = models.CharField(max_length=64, unique=True)

    def __str__(self) -> str:
        return self.tx
