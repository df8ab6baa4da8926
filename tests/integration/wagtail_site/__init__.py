"""A throwaway Wagtail site that uses django_sqlqueue as its `django.tasks` backend."""
