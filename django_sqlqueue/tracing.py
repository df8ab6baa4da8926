"""OpenTelemetry spans for enqueue and execution (the `otel` extra: opentelemetry-api).

Enqueue opens a PRODUCER span, child of whatever span is current (the request's, with
Django instrumentation), and stores its W3C trace context in the job's `trace_context` column.
The worker opens a CONSUMER span for each attempt with that context as parent, current while
the handler runs, so the handler's own spans nest under it: a job's spans are part of the
trace of the request that enqueued it, however long it waited.

Without the API installed every function here is a no-op (`ENABLED` is False and callers test
it first); with the API but no tracer provider set (no SDK), no span is made and no context is
stored. Which SDK, span processor and exporter to use is the project's choice.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .rows import ClaimedJob, NewJob

try:
    # `propagate` and `context` are imported once a tracer provider is set (see _tracer): the
    # propagators load from entry points, ~25 ms at every process start otherwise.
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError:  # the API is not installed: nothing to do, at no cost
    ENABLED = False
else:
    ENABLED = True

#: The instrumentation scope the spans are reported under.
SCOPE = "django_sqlqueue"
#: `messaging.system`, as OpenTelemetry's messaging conventions name the queue product.
SYSTEM = "django_sqlqueue"


_provider: Any = None
_tracer_of_provider: Any = None
propagate: Any = None
otel_context: Any = None


def _tracer() -> Any:
    """This package's tracer, or None while no tracer provider is set (the API alone: its
    spans would record nothing, so none is made and no context is stored)."""
    global _provider, _tracer_of_provider, propagate, otel_context
    provider = trace.get_tracer_provider()
    if provider is not _provider:
        _provider = provider
        _tracer_of_provider = (
            None if isinstance(provider, trace.ProxyTracerProvider) else provider.get_tracer(SCOPE)
        )
        if _tracer_of_provider is not None and propagate is None:
            from opentelemetry import context
            from opentelemetry import propagate as propagation

            propagate, otel_context = propagation, context
    return _tracer_of_provider


def recording() -> bool:
    """Whether spans are recorded (the API and a tracer provider): a caller on the hot path
    skips the span's context manager when not."""
    return ENABLED and _tracer() is not None


@contextmanager
def enqueue_span(jobs: Sequence[NewJob]) -> Iterator[None]:
    """A PRODUCER span around storing `jobs`; each job carries its context out."""
    tracer = _tracer() if ENABLED and jobs else None
    if tracer is None:
        yield
        return
    first = jobs[0]
    attributes: dict[str, str | int] = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "send",
        "messaging.destination.name": first.queue,
        "sqlqueue.job.name": first.name,
    }
    if len(jobs) > 1:
        attributes["messaging.batch.message_count"] = len(jobs)
    with tracer.start_as_current_span(
        f"send {first.name}", kind=SpanKind.PRODUCER, attributes=attributes
    ) as span:
        if span.get_span_context().is_valid:
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            for job in jobs:
                job.trace_context = carrier
        yield


class _NoSpan:
    __slots__ = ()

    def finish(self, result: Any) -> None:
        return None


NO_SPAN = _NoSpan()


class JobSpan:
    """The CONSUMER span of one attempt, current until `finish`."""

    def __init__(self, job: ClaimedJob, tracer: Any) -> None:
        parent = propagate.extract(job.trace_context) if job.trace_context else None
        self.span = tracer.start_span(
            f"process {job.name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes={
                "messaging.system": SYSTEM,
                "messaging.operation.type": "process",
                "messaging.destination.name": job.queue,
                "messaging.message.id": str(job.id),
                "sqlqueue.job.name": job.name,
                "sqlqueue.job.attempt": job.attempts,
            },
        )
        self.token = otel_context.attach(trace.set_span_in_context(self.span))

    def finish(self, result: Any) -> None:
        """End the span with the attempt's result (an AttemptResult, None if interrupted)."""
        try:
            if result is None:
                self.span.set_attribute("sqlqueue.job.outcome", "interrupted")
            else:
                outcome = getattr(result.outcome, "value", str(result.outcome))
                self.span.set_attribute("sqlqueue.job.outcome", outcome)
                if not result.is_success:
                    self.span.set_status(StatusCode.ERROR, result.error or outcome)
            self.span.end()
        finally:
            otel_context.detach(self.token)


def start_job_span(job: ClaimedJob) -> JobSpan | _NoSpan:
    """The attempt's span (made current), or a no-op without the API."""
    tracer = _tracer() if ENABLED else None
    if tracer is None:
        return NO_SPAN
    return JobSpan(job, tracer)
