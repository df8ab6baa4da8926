from django.apps import AppConfig


class ChaosConfig(AppConfig):
    name = "benchmarks.chaos.app"
    label = "chaos"
    default_auto_field = "django.db.models.BigAutoField"
