"""Small projects that point TASKS at the backend, for `manage.py check` and enqueue runs in
subprocesses (test_tasks_checks_project.py): django_sqlqueue missing from INSTALLED_APPS, with
or without tasks defined at start-up, and installed with a misconfigured backend."""
