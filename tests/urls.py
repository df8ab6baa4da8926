from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("queue/", include("django_sqlqueue.metrics.urls")),
]
