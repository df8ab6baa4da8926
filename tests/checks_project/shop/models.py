# Importing the tasks here defines them when Django starts, as many libraries do.
from . import tasks  # noqa: F401
