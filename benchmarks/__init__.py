"""Benchmarks of django-sqlqueue side by side with its peers: `python -m benchmarks run`."""
