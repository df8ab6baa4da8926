"""The job of the throughput drain: nothing, so a drain measures the queue and the network."""

from django_sqlqueue import job


@job("cluster.noop", max_attempts=1)
def noop() -> None:
    """Does nothing: the cost of a drain is then the queue's claims and outcomes alone."""
