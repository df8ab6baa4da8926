from django.apps import AppConfig
from django.db.backends.signals import connection_created


class SQLQueueConfig(AppConfig):
    name = "django_sqlqueue"
    verbose_name = "Job queue"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
        from .conf import get_settings
        from .sqlite_tuning import tune_sqlite_connection

        connection_created.connect(tune_sqlite_connection, dispatch_uid="django_sqlqueue_sqlite")
        if get_settings().autodiscover:
            from django.utils.module_loading import autodiscover_modules

            autodiscover_modules("jobs")
