"""OpenTelemetry for the service (docs/OPERATIONS.md, "Tracing"): a tracer provider of its own with an OTLP/HTTP
exporter, the FastAPI instrumentation for the server span; `trace_id` for the response header and the log lines.
Off unless the settings name a collector or an exporter: then no provider, no exporter and no instrumentation
exist, and the pipeline's spans (`graph/clients/tracing.py`) go to OpenTelemetry's no-op tracer.

The provider is the service's, not the process-wide one: tests run services with and without tracing in one
process, and a library that sets its own global provider does not receive the service's spans.

A server span records the request's address without its query string (`without_query`): a client that puts a key
in the URL (`?api_key=...`) must not find it in the tracing backend, whose readers are not the key's owners."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import Span, Tracer

from app.settings import Settings
from graph.clients.tracing import NOOP

log = logging.getLogger(__name__)
SKIPPED_URLS = "health,metrics"  # probes and scrapes: no trace each
# where the instrumentation writes the request's address, by semantic-convention version (old, new, both with
# OTEL_SEMCONV_STABILITY_OPT_IN=http/dup); `url.query` is the query on its own
URL_ATTRIBUTES = ("http.url", "http.target", "url.full")
QUERY_ATTRIBUTE = "url.query"


def without_query(span: Span, scope: dict[str, Any]) -> None:
    """The server span's `server_request_hook`: its URL attributes lose their query string. It runs after the
    instrumentation set them, and nothing sets them again; a query is never used by this API, so nothing of
    value is lost. (The instrumentation's own redaction knows a few cloud signature parameters, not `api_key`.)"""
    if not span.is_recording():
        return
    attributes = getattr(span, "attributes", None) or {}
    for key in URL_ATTRIBUTES:
        value = attributes.get(key)
        if isinstance(value, str) and "?" in value:
            span.set_attribute(key, value.partition("?")[0])
    if attributes.get(QUERY_ATTRIBUTE):
        span.set_attribute(QUERY_ATTRIBUTE, "")


@dataclass
class Tracing:
    tracer: Tracer = NOOP
    provider: Any = None  # opentelemetry.sdk.trace.TracerProvider when on
    capture_content: bool = False

    @property
    def on(self) -> bool:
        return self.provider is not None

    def instrument(self, app: Any) -> None:
        """The server span of every request (not of its body chunks: one span per SSE write would cost more than
        the request)."""
        if not self.on:
            return
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        FastAPIInstrumentor.instrument_app(app, tracer_provider=self.provider, excluded_urls=SKIPPED_URLS,
                                           exclude_spans=["receive", "send"], server_request_hook=without_query)

    def shutdown(self) -> None:
        """Export what is left (the spans of the last requests), then stop the exporter."""
        if self.on:
            self.provider.shutdown()


def start_tracing(settings: Settings) -> Tracing:
    if not settings.tracing:
        return Tracing()
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    provider = TracerProvider(resource=Resource.create({"service.name": settings.otel_service_name}))
    if settings.otel_traces_exporter == "console":
        exporter: Any = ConsoleSpanExporter()
        where = "the console"
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        where = settings.otel_exporter_otlp_traces_endpoint or (
            (settings.otel_exporter_otlp_endpoint or "http://localhost:4318").rstrip("/") + "/v1/traces")
        exporter = OTLPSpanExporter(endpoint=where)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    log.info("OpenTelemetry traces go to %s%s", where, " (with prompts and replies)" if settings.otel_capture_content else "")
    return Tracing(provider.get_tracer("neo-nl-agent"), provider, settings.otel_capture_content)


def trace_id() -> str:
    """The current trace's id (32 hex digits), or "" outside a recorded span."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""
