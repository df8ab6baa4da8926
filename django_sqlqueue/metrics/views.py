"""The metrics view for the web side: the queue's gauges from the database, for a Prometheus
that scrapes the web application rather than (or as well as) the supervisors.

Counters and histograms of finished attempts live in the worker processes and are served by
`runworkers --metrics-port`; this view serves what any process can read from the database:
jobs per queue and status, the oldest waiting job, workers by state. One reading is shared by
the requests of a process for STATE_INTERVAL seconds, so scrapes never pile up queries.

Who may read it: a request bearing `Authorization: Bearer <SQLQUEUE["METRICS_TOKEN"]>`, or a
logged-in active staff user with the `django_sqlqueue.view_job` permission.
"""

from __future__ import annotations

import hmac
import threading
import time

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ..conf import get_settings
from . import prometheus
from .state import QueueState, read_state

#: Seconds one reading of the queue serves the requests of this process.
STATE_INTERVAL = 5.0
PERMISSION = "django_sqlqueue.view_job"

_lock = threading.Lock()
_cached: tuple[float, str, QueueState] | None = None


def current_state() -> QueueState:
    """The queue's state, read at most once per STATE_INTERVAL in this process."""
    global _cached
    alias = get_settings().database
    with _lock:
        now = time.monotonic()
        if _cached is None or _cached[1] != alias or now - _cached[0] >= STATE_INTERVAL:
            _cached = (now, alias, read_state(alias))
        return _cached[2]


def forget_state() -> None:
    """Drop the cached reading (tests)."""
    global _cached
    with _lock:
        _cached = None


def bearer_allowed(request: HttpRequest) -> bool:
    token = get_settings().metrics_token
    given = request.headers.get("Authorization", "")
    if token is None or not given.startswith("Bearer "):
        return False
    return hmac.compare_digest(given.removeprefix("Bearer ").strip().encode(), token.encode())


def staff_allowed(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)  # None without the authentication middleware
    return bool(user and user.is_active and user.is_staff and user.has_perm(PERMISSION))


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not (bearer_allowed(request) or staff_allowed(request)):
        user = getattr(request, "user", None)
        if get_settings().metrics_token is not None and not (user and user.is_authenticated):
            response = HttpResponse("A bearer token is required.\n", status=401)
            response["WWW-Authenticate"] = 'Bearer realm="django-sqlqueue metrics"'
            return response
        return HttpResponse("Not allowed to read the queue's metrics.\n", status=403)
    if not prometheus.available():
        return HttpResponse(
            "prometheus-client is not installed: pip install 'django-sqlqueue[metrics]'.\n",
            status=501,
        )
    state = current_state()
    body, content_type = prometheus.render([prometheus.StateCollector(lambda: state)])
    return HttpResponse(body, content_type=content_type)
