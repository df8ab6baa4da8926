from django_sqlqueue import job


@job("attempt_cost.noop")
def noop(i: int) -> None:
    """Does nothing: what is measured is the worker's path around it."""
