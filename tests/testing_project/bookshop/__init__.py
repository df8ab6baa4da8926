"""A small project that tests its jobs with django_sqlqueue.testing."""
