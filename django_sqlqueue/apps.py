from importlib import import_module

import django
from django.apps import AppConfig
from django.conf import settings
from django.db.backends.signals import connection_created
from django.utils.translation import gettext_lazy as _


class SQLQueueConfig(AppConfig):
    name = "django_sqlqueue"
    verbose_name = _("Job queue")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401 - registers the system checks
        from .conf import DEFAULTS, user_settings
        from .databases import tune_new_connection
        from .runtime.runner import register_runner_factory
        from .tasks import runner_factory as tasks_runner_factory

        connection_created.connect(tune_new_connection, dispatch_uid="django_sqlqueue_tuning")
        # Read raw: a bad value elsewhere in SQLQUEUE must reach the system checks, not crash here.
        if user_settings().get("AUTODISCOVER", DEFAULTS["AUTODISCOVER"]):
            from django.utils.module_loading import autodiscover_modules

            autodiscover_modules("jobs")
        # Workers run django.tasks @task functions stored by our backend; the framework itself
        # is imported only when such a job turns up.
        register_runner_factory(tasks_runner_factory)
        # Django registers the task backends' system checks when django.tasks is first
        # imported, which a project may not do before `check` runs (its tasks modules are
        # imported by its views): import it wherever TASKS is set, so the backend's checks run.
        # (The stubs' plugin reads every attribute of settings as a setting; is_overridden is a
        # method of Django's LazySettings.)
        overridden = settings.is_overridden("TASKS")  # type: ignore[misc]
        if django.VERSION >= (6, 0) and overridden:
            import_module("django.tasks")
