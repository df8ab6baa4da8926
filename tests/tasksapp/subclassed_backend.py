"""A project's own subclass of the backend, for the runworkers banner test."""

from django_sqlqueue.backend import SQLQueueBackend


class Backend(SQLQueueBackend):
    pass
