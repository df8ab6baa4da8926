from django.apps import AppConfig


class WagtailSiteConfig(AppConfig):
    name = "tests.integration.wagtail_site"
    label = "wagtail_site"
    default_auto_field = "django.db.models.BigAutoField"
