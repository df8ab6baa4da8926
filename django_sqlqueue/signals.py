"""Signals sent by workers, for metrics, alerts and dead-letter hooks.

Each is sent with `sender` = the job name and `job` = the ClaimedJob.
"""

from django.dispatch import Signal

#: A worker is about to run an attempt.
job_started = Signal()
#: An attempt returned; `result` is its return value.
job_completed = Signal()
#: An attempt failed and a retry is scheduled; `error` is the message, `run_at` the retry time.
job_failed = Signal()
#: A job reached the dead letter: attempts spent, discarded, or no handler; `error` says why.
job_dead = Signal()
