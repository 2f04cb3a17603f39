"""The pipeline's OpenTelemetry spans (docs/OPERATIONS.md, Tracing): one per node run (a research sub-agent's names its task
and collection), one per document tool call, one per model call with the GenAI attributes.

Only OpenTelemetry's API is used here: the tracer comes with the clients and the run's context, and is a no-op
one unless the service configured tracing (`app/tracing.py`), which then records nothing and costs a few
microseconds a span. What a span may say: names, counts, models, tokens, durations. Never a prompt, passage,
answer, key or token text, unless the operator turned content capture on (`OTEL_CAPTURE_CONTENT`).

That includes failures: an exception's message can quote content (an upstream's 500 body that repeats the prompt,
a tool error that quotes a passage), and OpenTelemetry's `start_as_current_span` records it twice by default, as
the span's status description and as an `exception` event. Spans here are opened with `safe_span`, which records
only the exception's type unless content capture is on (`record_failure`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

NOOP: Tracer = trace.NoOpTracer()


def record_failure(span: Span, error: BaseException, *, capture: bool = False) -> None:
    """Mark `span` failed by `error`: the status and an `exception` event say the exception's type, never its
    message (which may quote a prompt, a passage or an upstream's reply), unless content capture is on."""
    if not span.is_recording():
        return
    kind = type(error).__name__
    if capture:  # opt-in: the message may leave the service like the prompts do
        span.set_status(Status(StatusCode.ERROR, f"{kind}: {error}"))
        span.record_exception(error)
    else:
        span.set_status(Status(StatusCode.ERROR, kind))
        span.add_event("exception", {"exception.type": kind})


@contextmanager
def safe_span(tracer: Tracer, name: str, *, kind: SpanKind = SpanKind.INTERNAL,
              attributes: dict[str, Any] | None = None, capture: bool = False) -> Iterator[Span]:
    """`tracer.start_as_current_span(name)` that records a failure by `record_failure`, not by OpenTelemetry's
    default (the exception's message as status and event). Like the default, only an `Exception` marks the span
    failed: a cancellation (a client that left) or a closed generator is no error of the span's work."""
    with tracer.start_as_current_span(name, kind=kind, attributes=attributes, record_exception=False,
                                      set_status_on_exception=False) as current:
        try:
            yield current
        except Exception as exc:
            record_failure(current, exc, capture=capture)
            raise


def traced(node: Callable[[Any, Any], Awaitable[Any]]) -> Callable[[Any, Any], Awaitable[Any]]:
    """A pipeline node that runs in a span of its own ("node research"), current while it runs, so the tool and
    model calls it makes are its children. The signature (and the input schema LangGraph reads from the type of
    its first parameter, `ResearchInput` for a sub-agent) stays the node's."""
    name = node.__name__

    @wraps(node)
    async def run(state: Any, runtime: Any) -> Any:
        attributes: dict[str, Any] = {"neo.node": name}
        task = state.get("task") if isinstance(state, dict) else None
        if task is not None:  # a research sub-agent (`Send` input)
            attributes |= {"neo.task.id": task.id, "neo.collection": task.collection}
        with safe_span(runtime.context.tracer, f"node {name}", attributes=attributes):
            return await node(state, runtime)

    return run


def with_trace_context(headers: dict[str, str], span: Span | None = None) -> dict[str, str]:
    """`headers` with the W3C `traceparent` of `span` (or of the current span): the model and document servers
    continue the trace. Nothing is added when no span records (tracing off)."""
    context = trace.set_span_in_context(span) if span is not None else None
    propagate.inject(headers, context=context)
    return headers


def model_span(tracer: Tracer, model: str, step: str, max_tokens: int | None, streamed: bool) -> Span:
    """A model call's span (GenAI semantic conventions), not made current: a streamed answer is read from other
    tasks than the one that started it (a comparison's sides). The caller ends it (`end_model_span`)."""
    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                  "gen_ai.request.model": model, "neo.step": step or "other", "neo.streamed": streamed}
    if max_tokens:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    return tracer.start_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes)


def end_model_span(span: Span, *, input_tokens: int, output_tokens: int, finish: str, capture: bool,
                   messages: list[dict[str, str]] | None = None, reply: str = "", error: BaseException | None = None
                   ) -> None:
    if span.is_recording():
        span.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        if finish:
            span.set_attribute("gen_ai.response.finish_reasons", [finish])
        if capture:  # opt-in: the prompt and the reply leave the service
            span.set_attribute("gen_ai.input.messages", json.dumps(messages or [], ensure_ascii=False))
            span.set_attribute("gen_ai.output.messages", json.dumps(
                [{"role": "assistant", "content": reply}], ensure_ascii=False))
        if error is not None:  # an upstream's error body may quote the prompt
            record_failure(span, error, capture=capture)
    span.end()
