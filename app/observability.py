"""Observability: request ids, JSON logs, Prometheus metrics and an event-loop lag monitor."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import re
import time
import uuid

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pythonjsonlogger.json import JsonFormatter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.tracing import trace_id

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
_VALID_ID = re.compile(r"^[\w.:-]{1,64}$")


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class _TraceIdFilter(logging.Filter):
    """The OpenTelemetry trace id of the request a line is logged for ("-" outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = trace_id() or "-"
        return True


def configure_logging(level: str, json_logs: bool, traced: bool = False) -> None:
    """`traced`: tracing is on, and every line names its trace (docs/OPERATIONS.md, "Tracing")."""
    handler = logging.StreamHandler()
    handler.addFilter(_RequestIdFilter())
    if traced:
        handler.addFilter(_TraceIdFilter())
    if json_logs:
        fields = "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s" + (" %(trace_id)s" if traced else "")
        handler.setFormatter(JsonFormatter(fields))
    else:
        ids = "%(request_id)s trace=%(trace_id)s" if traced else "%(request_id)s"
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s %(name)s [{ids}] %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpx2", "mcp.client.streamable_http", "mcp.server.streamable_http_manager"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


class RequestIdMiddleware:
    """Takes a well-formed incoming X-Request-Id or makes one; sets it for logs and on the response. With tracing on
    the response also says its trace (`X-Trace-Id`: the id to look the request up by in the tracing UI); this runs
    inside the server span, which the FastAPI instrumentation opens around the whole middleware stack."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        rid = incoming if _VALID_ID.match(incoming) else uuid.uuid4().hex
        token = request_id.set(rid)

        ids = [(b"x-request-id", rid.encode())]
        if trace := trace_id():
            ids.append((b"x-trace-id", trace.encode()))

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *ids]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            request_id.reset(token)


class Metrics:
    """Prometheus metrics of one app (own registry, so several apps can live in one process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("neo_requests", "Chat requests", ["kind", "outcome"], registry=r)
        self.latency = Histogram(
            "neo_request_seconds", "Chat request duration", ["kind"], registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160),
        )
        self.first_answer = Histogram(
            "neo_first_answer_token_seconds", "Time to the first answer token (streaming)", registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40),
        )
        self.upstream_calls = Counter("neo_upstream_calls", "Upstream LLM calls", registry=r)
        self.tokens = Counter("neo_llm_tokens", "Upstream LLM tokens by pipeline step (kind: prompt or completion)",
                              ["step", "kind"], registry=r)
        self.errors = Counter("neo_errors", "Errors by kind", ["kind"], registry=r)
        self.fallbacks = Counter(
            "neo_llm_fallbacks", "Model steps that fell back to their deterministic strategy (reason: unavailable = "
            "the call failed, invalid = the reply was unusable)", ["step", "reason"], registry=r,
        )
        self.unsupported = Counter(
            "neo_unsupported_sentences", "Answer sentences not supported by the passages they cite", registry=r
        )
        self.echo = Counter(
            "neo_echo_guard_lines", "Lines of the model's answer calls as the prompt-echo guard judged them, by step "
            "(verdict: copy = a line of the prompt, dropped; trimmed = a copied label or question cut off and the rest "
            "kept; answer = kept)", ["step", "verdict"], registry=r,
        )
        self.injection = Counter(
            "neo_injection_suspected", "Retrieved passages that held sentences addressed to the model (withheld from "
            "every prompt)", ["collection"], registry=r,
        )
        self.cache = Gauge("neo_cache_lookups", "Response and plan cache lookups since start", ["result"], registry=r)
        self.loop_lag = Gauge("neo_event_loop_lag_seconds", "Largest event-loop lag in the last second", registry=r)
        self.loop_lag_max = Gauge("neo_event_loop_lag_max_seconds", "Largest event-loop lag since start", registry=r)
        self.in_flight = Gauge("neo_requests_in_flight", "Chat requests being answered", registry=r)
        self.tasks = Gauge("neo_asyncio_tasks", "asyncio tasks alive in the service's event loop", registry=r)

    def render(self, cache_hits: int, cache_misses: int) -> bytes:
        self.tasks.set(len(asyncio.all_tasks()))
        self.cache.labels("hit").set(cache_hits)
        self.cache.labels("miss").set(cache_misses)
        return generate_latest(self.registry)

    def finish(self, kind: str, outcome: str, started: float, usage, first_answer_at: float | None) -> None:
        """Record one finished chat request (`usage` is the protocol UsageInfo summed over upstream calls)."""
        self.requests.labels(kind, outcome).inc()
        self.latency.labels(kind).observe(time.perf_counter() - started)
        if first_answer_at is not None:
            self.first_answer.observe(first_answer_at - started)
        self.upstream_calls.inc(usage.upstream_calls)
        for step, part in usage.steps.items():
            self.tokens.labels(step, "prompt").inc(part.prompt_tokens)
            self.tokens.labels(step, "completion").inc(part.completion_tokens)
        if outcome != "ok":
            self.errors.labels(outcome).inc()


async def monitor_loop_lag(metrics: Metrics, interval_s: float = 0.05) -> None:
    """Measures how late the event loop wakes a sleeping task: blocking work shows up here."""
    loop = asyncio.get_running_loop()
    window_max, window_start, overall = 0.0, time.monotonic(), 0.0
    while True:
        before = loop.time()
        await asyncio.sleep(interval_s)
        lag = max(0.0, loop.time() - before - interval_s)
        window_max, overall = max(window_max, lag), max(overall, lag)
        if time.monotonic() - window_start >= 1.0:
            metrics.loop_lag.set(window_max)
            metrics.loop_lag_max.set(overall)
            window_max, window_start = 0.0, time.monotonic()
