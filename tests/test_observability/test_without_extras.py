"""Without prometheus-client: a clear error for --metrics-port, 501 from the view; the
workers' own watchers (rollup) need nothing."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_metrics_port_needs_the_extra(spawn_django):
    child = spawn_django(
        """
        import sys
        sys.modules["prometheus_client"] = None  # as if it were not installed
        from django.core.management import call_command
        from django.core.management.base import CommandError
        try:
            call_command("runworkers", "--burst", "--metrics-port", "0")
        except CommandError as error:
            print("refused:", error)
        """
    )
    out, err = child.communicate(timeout=60)
    assert "refused: --metrics-port needs prometheus-client" in out, err
    assert "django-sqlqueue[metrics]" in out


def test_view_answers_501(spawn_django):
    child = spawn_django(
        """
        import sys
        sys.modules["prometheus_client"] = None
        from django.contrib.auth.models import User
        from django.test import Client
        from django.test.utils import setup_test_environment
        setup_test_environment()  # the test client's host, as in tests
        user = User.objects.create_superuser("root", password="x")
        client = Client()
        client.force_login(user)
        response = client.get("/queue/metrics")
        print(response.status_code, response.content.decode().strip())
        """
    )
    out, err = child.communicate(timeout=60)
    assert out.startswith("501 prometheus-client is not installed"), out + err


def test_bad_metrics_port():
    from django.core.management import call_command
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--metrics-port must be from 0 to 65535"):
        call_command("runworkers", "--metrics-port", "-1")
    # Upper bounds are the argument parser's, as for every numeric option.
    with pytest.raises(
        CommandError, match=r"--metrics-port: 70000 is too large \(the most is 65535\)"
    ):
        call_command("runworkers", "--metrics-port", "70000")
