"""Side tables: what really ran (written by handlers), what producers really committed, and
the counter the atomic jobs increment.

The harness creates them with `migrate` in a database it made for the run and drops
afterwards; the migration also creates the atomic jobs' counter row.
"""

from django.db import models


class Execution(models.Model):
    """One start of a handler, written before its work; `finished` once its body returned
    or raised (never, if its process was killed)."""

    #: The handler call's own key: its start row is written once, whatever the retries.
    call = models.CharField(max_length=32, unique=True)
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


#: The Counter row that every atomic job adds one to.
ATOMIC_COUNTER = "atomic"


class Counter(models.Model):
    """A number that atomic jobs increment in the transaction that records their completion:
    at the end it must equal the number of completed atomic jobs, exactly."""

    name = models.CharField(max_length=32, unique=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} = {self.value}"
