"""A side table that test jobs write to, so tests can count real executions."""

from django.db import models


class Execution(models.Model):
    job_id = models.BigIntegerField(db_index=True)
    attempt = models.PositiveIntegerField()
    worker_pid = models.PositiveIntegerField()
    label = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt} in pid {self.worker_pid}"


class Order(models.Model):
    """A business row, written in the same transaction as an enqueue."""

    reference = models.CharField(max_length=50)

    def __str__(self) -> str:
        return self.reference


class SignalLog(models.Model):
    """One row per worker signal a test receiver saw (receivers live in jobs.py)."""

    signal = models.CharField(max_length=20)
    job_id = models.BigIntegerField()
    detail = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"{self.signal} for job {self.job_id}"


class Counter(models.Model):
    """A row atomic jobs increment: exactly-once database effects are counted on it."""

    name = models.CharField(max_length=50, unique=True)
    value = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} = {self.value}"
