"""Turn spans into OpenTelemetry: the SDK and the OTLP exporter, imported only here.

Imported only when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set
(:func:`helmr.operator.telemetry.tracing.from_environ`),
so the control plane without tracing, and the runner always, never load the
SDK. Its ``tracing`` extra installs it (the operator image has it).

A span's ids come from its Turn: the trace id is 128 bits of a hash of the
Turn's id and a span id 64 bits of a hash of the Turn's id and the span's name,
so spans emitted at different times (or by different processes) link up as
one trace, and emitting one again gives it the same ids. Every span carries
``helmr.turn.id``, to find a Turn's trace by it.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from datetime import datetime

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from helmr import __version__
from helmr.operator.telemetry.turn_traces import TurnSpan, TurnTraces

log = logging.getLogger(__name__)

SERVICE = "helmr-control-plane"
"""The ``service.name``, unless ``OTEL_SERVICE_NAME`` says otherwise."""


def trace_id(turn_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(turn_id.encode(), digest_size=16).digest(), "big")


def span_id(turn_id: str, name: str) -> int:
    digest = hashlib.blake2b(f"{turn_id}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class _TurnIds(IdGenerator):
    """Gives the next span the ids its Turn decides (set just before it starts)."""

    def __init__(self) -> None:
        self.trace_id = 0
        self.span_id = 0

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return self.span_id


def _nanoseconds(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000) * 1000


class OtelSink:
    """:class:`~helmr.operator.telemetry.turn_traces.SpanSink` over a TracerProvider of its own
    (not the global one: its id generator is the Turns')."""

    def __init__(self, processor: SpanProcessor, resource: Resource | None = None) -> None:
        self._ids = _TurnIds()
        attributes: Mapping[str, str] = {"service.name": SERVICE, "service.version": __version__}
        # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, which win.
        self._provider = TracerProvider(
            resource=resource or Resource.create(dict(attributes)), id_generator=self._ids
        )
        self._provider.add_span_processor(processor)
        self._tracer = self._provider.get_tracer("helmr.turns", __version__)

    def emit(self, span: TurnSpan) -> None:
        turn_trace = trace_id(span.turn_id)
        self._ids.trace_id, self._ids.span_id = turn_trace, span_id(span.turn_id, span.name)
        started = self._tracer.start_span(
            span.name,
            context=self._parent(turn_trace, span),
            attributes={"helmr.turn.id": span.turn_id, **span.attributes},
            start_time=_nanoseconds(span.start),
        )
        if span.error is not None:
            started.set_status(Status(StatusCode.ERROR, span.error))
        started.end(end_time=_nanoseconds(span.end))

    def shutdown(self) -> None:
        self._provider.shutdown()

    @staticmethod
    def _parent(turn_trace: int, span: TurnSpan) -> Context:
        # An empty context for the root: never whatever span happens to be current.
        if span.parent is None:
            return Context()
        parent = SpanContext(
            turn_trace, span_id(span.turn_id, span.parent), False, TraceFlags(TraceFlags.SAMPLED)
        )
        return trace.set_span_in_context(NonRecordingSpan(parent), Context())


def otlp_traces() -> TurnTraces:
    """Turn traces sent by OTLP over HTTP, configured by the ``OTEL_EXPORTER_OTLP_*``
    variables (endpoint, headers, timeout), in batches."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return TurnTraces(OtelSink(BatchSpanProcessor(OTLPSpanExporter())))
