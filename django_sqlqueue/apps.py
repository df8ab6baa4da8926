from django.apps import AppConfig
from django.conf import settings
from django.db.backends.signals import connection_created


class SQLQueueConfig(AppConfig):
    name = "django_sqlqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
        from .conf import DEFAULTS, user_settings
        from .sqlite_tuning import tune_sqlite_connection

        connection_created.connect(tune_sqlite_connection, dispatch_uid="django_sqlqueue_sqlite")
        # Read raw: a bad value elsewhere in SQLQUEUE must reach the system checks, not crash here.
        if user_settings().get("AUTODISCOVER", DEFAULTS["AUTODISCOVER"]):
            from django.utils.module_loading import autodiscover_modules

            autodiscover_modules("jobs")
        tasks = getattr(settings, "TASKS", None) or {}
        if any(str(t.get("BACKEND", "")).startswith("django_sqlqueue.") for t in tasks.values()):
            from . import backend  # noqa: F401 - lets workers run django.tasks @task functions
