"""The enqueue path: `options` decides what a job will be, `store` inserts it in the caller's
transaction, `keys` makes an idempotency key store one job however many callers race.

Nothing is imported here: `options` must stay importable before Django's app registry is
ready (the `@job` decorator runs at import time of `jobs.py` modules), `store` needs models.
"""
