"""`path("queue/", include("django_sqlqueue.metrics.urls"))` serves `queue/metrics`."""

from django.urls import path

from . import views

app_name = "django_sqlqueue_metrics"
urlpatterns = [path("metrics", views.metrics, name="metrics")]
