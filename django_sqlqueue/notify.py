"""PostgreSQL LISTEN/NOTIFY: the channel idle workers listen on.

Enqueues notify from the INSERT itself (see insertion.py): PostgreSQL delivers a
notification only when its transaction commits, and folds identical ones of a transaction
into one, so each enqueueing transaction wakes the workers once per queue it wrote to.
"""

CHANNEL = "django_sqlqueue"
