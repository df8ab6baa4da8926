"""The Django admin mounted where Wagtail mounts it, to show no link assumes `/admin/`."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("django-admin/", admin.site.urls)]
