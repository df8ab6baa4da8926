"""`@task` functions and settings for the django.tasks backend tests (not an installed app)."""
