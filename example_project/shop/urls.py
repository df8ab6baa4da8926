from django.urls import path

from . import views

app_name = "shop"
urlpatterns = [
    path("", views.index, name="index"),
    path("jobs/", views.jobs_fragment, name="jobs"),
    path("enqueue/<slug:kind>/", views.enqueue, name="enqueue"),
]
