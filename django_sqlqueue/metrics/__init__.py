"""Observability: the queue's state as gauges (state.py), Prometheus metrics (prometheus.py,
the `metrics` extra), the supervisor's endpoint (server.py) and the web view (views.py,
mounted from urls.py). See docs/observability.md."""
