"""OpenTelemetry: a job's execution span is a child of the span that enqueued it, which is a
child of the request's; the handler's own spans nest under the execution span."""

from __future__ import annotations

import json

import pytest

from django_sqlqueue import tracing
from django_sqlqueue.models import Job
from django_sqlqueue.runtime.worker import JobWorker, WorkerOptions

pytest.importorskip("opentelemetry.sdk")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

pytestmark = pytest.mark.django_db(transaction=True)

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="session")
def provider() -> TracerProvider:
    """One SDK provider for the session (OpenTelemetry allows setting it once)."""
    sdk = TracerProvider()
    sdk.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(sdk)
    return sdk


@pytest.fixture
def spans(provider: TracerProvider):
    _exporter.clear()
    yield _exporter
    _exporter.clear()


def run_all() -> None:
    JobWorker("tracing-worker", WorkerOptions(burst=True)).work()


def by_name(exporter: InMemorySpanExporter) -> dict[str, list]:
    found: dict[str, list] = {}
    for span in exporter.get_finished_spans():
        found.setdefault(span.name, []).append(span)
    return found


def test_job_span_is_a_child_of_the_request(spans, register_job):
    inner = trace.get_tracer("tests")

    def handler(value):
        with inner.start_as_current_span("inside the handler"):
            return value

    job_handler = register_job("tests.traced", handler)
    with inner.start_as_current_span("request") as request:
        job = job_handler.enqueue(value=3)
    stored = Job.objects.get(pk=job.pk).trace_context
    assert stored["traceparent"].split("-")[1] == format(
        request.get_span_context().trace_id, "032x"
    )
    run_all()
    found = by_name(spans)
    [send] = found["send tests.traced"]
    [process] = found["process tests.traced"]
    [handler_span] = found["inside the handler"]
    assert send.kind == SpanKind.PRODUCER and process.kind == SpanKind.CONSUMER
    assert send.parent.span_id == request.get_span_context().span_id
    assert process.parent.span_id == send.context.span_id
    assert process.context.trace_id == request.get_span_context().trace_id
    assert handler_span.parent.span_id == process.context.span_id
    assert process.attributes["messaging.message.id"] == str(job.pk)
    assert process.attributes["sqlqueue.job.outcome"] == "completed"
    assert process.status.status_code != StatusCode.ERROR


def test_failure_marks_the_span(spans, register_job):
    def broken():
        raise ValueError("nope")

    register_job("tests.traced_broken", broken, max_attempts=1).enqueue()
    run_all()
    [process] = by_name(spans)["process tests.traced_broken"]
    assert process.status.status_code == StatusCode.ERROR
    assert "nope" in process.status.description


def test_enqueue_many_is_one_span(spans):
    from tests.testapp.jobs import noop

    jobs = noop.enqueue_many([{}, {}, {}])
    [send] = by_name(spans)["send tests.noop"]
    assert send.attributes["messaging.batch.message_count"] == 3
    contexts = {
        json.dumps(j.trace_context) for j in Job.objects.filter(pk__in=[j.pk for j in jobs])
    }
    assert len(contexts) == 1


def test_without_a_recording_span_nothing_is_stored(spawn_django):
    """The API without an SDK: non-recording spans, no context in the row."""
    child = spawn_django(
        """
        from django_sqlqueue import tracing
        from tests.testapp.jobs import noop
        job = noop.enqueue()
        job.refresh_from_db()
        print(tracing.ENABLED, job.trace_context)
        """
    )
    out, err = child.communicate(timeout=60)
    assert out.split() == ["True", "None"], err


def test_without_the_api_tracing_is_off(spawn_django):
    child = spawn_django(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if it were not installed
        import importlib
        from django_sqlqueue import tracing
        importlib.reload(tracing)
        from tests.testapp.jobs import noop
        job = noop.enqueue()
        job.refresh_from_db()
        print(tracing.ENABLED, job.trace_context, tracing.start_job_span(None) is tracing.NO_SPAN)
        """
    )
    out, err = child.communicate(timeout=60)
    assert out.split() == ["False", "None", "True"], err


def test_module_flag_matches_installation():
    assert tracing.ENABLED is True
