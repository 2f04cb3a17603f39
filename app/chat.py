"""One chat-completion request: validation, state, pipeline run, and rendering (streamed or not)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from app.errors import APIError, default_code, event_status
from app.observability import Metrics
from app.protocol import ChatCompletion, ChatCompletionRequest, Choice, ResponseMessage, completion_id, now
from app.services import Services
from app.sse import ChunkRenderer
from app.tasks import answer_task
from graph import messages
from graph.cache import cache_key
from graph.events import (
    AnswerDelta,
    Degraded,
    ErrorEvent,
    Finished,
    LLMFallback,
    SourceFound,
    Step,
    ThoughtEvent,
    Unsupported,
    UsageEvent,
    from_record,
    to_record,
)
from graph.language import detect_language
from graph.models import Turn
from graph.runner import run_pipeline, start

log = logging.getLogger(__name__)

_THINK_BLOCK = re.compile(r"<think>.*?</think>\s*", re.S | re.I)


def conversation(request: ChatCompletionRequest) -> list[Turn]:
    """User/assistant turns up to the last user message; 400 when there is no question.

    System and developer messages are not passed to the pipeline: its own prompts define its behaviour."""
    turns: list[Turn] = []
    for message in request.messages:
        text = message.text()
        if message.role in ("user", "assistant"):
            if message.role == "assistant":
                text = _THINK_BLOCK.sub("", text)
            turns.append(Turn(role=message.role, content=text))
    while turns and turns[-1].role != "user":
        turns.pop()
    if not turns or not turns[-1].content.strip():
        raise APIError(400, "messages must contain a user message with text content", param="messages")
    return turns


def validate(request: ChatCompletionRequest, services: Services) -> None:
    settings = services.settings
    if request.model not in (settings.model_id, settings.lite_model_id) and not settings.accept_any_model:
        raise APIError(404, f"The model '{request.model}' does not exist", param="model", code="model_not_found")
    if request.n not in (None, 1):
        raise APIError(400, "only n=1 is supported", param="n", code="unsupported_value")
    if len(request.messages) > settings.max_messages:
        raise APIError(400, f"at most {settings.max_messages} messages are accepted", param="messages",
                       code="too_many_messages")
    for i, message in enumerate(request.messages):
        if len(message.text()) > settings.max_message_chars:
            raise APIError(
                400, f"message {i} is longer than {settings.max_message_chars} characters", param=f"messages.{i}.content",
                code="context_length_exceeded")


_REPLAYED = (Step, SourceFound, AnswerDelta, Finished)


async def pipeline_events(
    services: Services, turns: list[Turn], tenant: str, model: str
) -> AsyncIterator[ThoughtEvent]:
    """The pipeline's events, bounded by REQUEST_TIMEOUT_S; failures become one ErrorEvent.

    A complete, undegraded answer is kept in the response cache; the same conversation from the same API
    key then replays it (think lines, sources, answer) without running the pipeline."""
    settings = services.settings
    key = cache_key("answer", tenant, model, services.fingerprint, [(t.role, " ".join(t.content.split())) for t in turns])
    if settings.response_cache:
        hit = await services.cache.get(key)
        if hit is not None:
            yield Step(messages.line("cached", detect_language(turns[-1].content)))
            for record in hit:
                yield from_record(record)
            return
    state, context = start(turns, services.context, tenant)
    recorded: list[ThoughtEvent] = []
    cacheable = settings.response_cache
    try:
        async with asyncio.timeout(settings.request_timeout_s):
            async for event in run_pipeline(services.graph, state, context, max_concurrency=settings.research_concurrency):
                cacheable = cacheable and not isinstance(event, (Degraded, ErrorEvent))
                if isinstance(event, AnswerDelta) and recorded and isinstance(recorded[-1], AnswerDelta):
                    recorded[-1] = AnswerDelta(recorded[-1].text + event.text)
                elif isinstance(event, _REPLAYED):
                    recorded.append(event)
                yield event
        if cacheable:
            await services.cache.set(key, [to_record(e) for e in recorded], settings.cache_ttl_s)
    except TimeoutError:
        yield ErrorEvent(f"request timed out after {services.settings.request_timeout_s:.0f}s", "timeout")
    except Exception as exc:  # a bug must not become a hung or broken stream
        log.exception("pipeline failed")
        yield ErrorEvent(f"internal error in the pipeline ({type(exc).__name__})")


def _sse(data: dict[str, Any]) -> dict[str, str]:
    return {"data": json.dumps(data, ensure_ascii=False, separators=(",", ":"))}


async def stream_chat(
    renderer: ChunkRenderer, events: AsyncIterator[ThoughtEvent], include_usage: bool, record: RequestRecord
):
    """SSE payloads for sse-starlette: role chunk, think lines and answer as they come, finish, [DONE]."""
    outcome = "disconnected"
    try:
        for chunk in renderer.start():
            yield _sse(chunk)
        failed: ErrorEvent | None = None
        async for event in events:
            record.observe(event)
            for chunk in renderer.event(event):
                yield _sse(chunk)
            if isinstance(event, ErrorEvent):
                failed = event
                break
        if failed is None:
            for chunk in renderer.finish(include_usage):
                yield _sse(chunk)
        yield {"data": "[DONE]"}
        outcome = default_code(event_status(failed.kind)) if failed else "ok"
    finally:
        record.done(outcome, renderer)


class RequestRecord:
    """Metrics of one chat request, recorded once when it ends (however it ends)."""

    def __init__(self, metrics: Metrics, kind: str, streamed: bool) -> None:
        self.metrics, self.kind, self.streamed, self.started = metrics, kind, streamed, time.perf_counter()
        metrics.in_flight.inc()

    def observe(self, event: ThoughtEvent) -> None:
        if isinstance(event, LLMFallback):
            self.metrics.fallbacks.labels(event.step, event.reason).inc()
        elif isinstance(event, Unsupported):
            self.metrics.unsupported.inc(len(event.sentences))

    def done(self, outcome: str, renderer: ChunkRenderer) -> None:
        self.metrics.in_flight.dec()
        first = renderer.first_answer_at if self.streamed else None
        usage = renderer.usage
        self.metrics.finish(self.kind, outcome, self.started, usage, first)
        steps = {name: part.model_dump() for name, part in usage.steps.items()}
        log.info("%s request %s in %.2f s; upstream: %d calls, %d prompt + %d completion tokens %s", self.kind,
                 outcome, time.perf_counter() - self.started, usage.upstream_calls, usage.prompt_tokens,
                 usage.completion_tokens, " ".join(f"{name}={p['prompt_tokens']}+{p['completion_tokens']}"
                                                   for name, p in steps.items()),
                 extra={"outcome": outcome, "upstream_tokens": steps})


async def until_disconnected(request: Request, poll_s: float = 0.25) -> None:
    while not await request.is_disconnected():
        await asyncio.sleep(poll_s)


async def complete_chat(
    request: Request, renderer: ChunkRenderer, events: AsyncIterator[ThoughtEvent], record: RequestRecord
) -> ChatCompletion:
    """The non-streaming answer; a client that leaves cancels the pipeline (Starlette would not)."""
    work = asyncio.ensure_future(collect_chat(renderer, events, record))
    watch = asyncio.ensure_future(until_disconnected(request))
    outcome = "disconnected"
    try:
        await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        if work.done() and not work.cancelled():
            error = work.exception()
            outcome = error.code if isinstance(error, APIError) else ("ok" if error is None else default_code(500))
    finally:
        watch.cancel()
        if not work.done():
            work.cancel()
        record.done(outcome, renderer)
    if work.cancelled():
        raise APIError(499, "client closed the request", code="client_closed")
    return work.result()


async def collect_chat(renderer: ChunkRenderer, events: AsyncIterator[ThoughtEvent], record: RequestRecord
                       ) -> ChatCompletion:
    async for event in events:
        record.observe(event)
        if isinstance(event, ErrorEvent):
            raise APIError(event_status(event.kind), event.message)
        renderer.event(event)
    renderer.finish(include_usage=False)
    return ChatCompletion(
        id=renderer.id,
        created=renderer.created,
        model=renderer.model,
        choices=[
            Choice(
                message=ResponseMessage(
                    content=renderer.answer_text,
                    reasoning_content=renderer.reasoning_text if renderer.think_mode != "off" else None,
                )
            )
        ],
        usage=renderer.usage,
    )


async def task_events(services: Services, task: str, request: ChatCompletionRequest) -> AsyncIterator[ThoughtEvent]:
    messages = [{"role": m.role if m.role != "developer" else "system", "content": m.text()}
                for m in request.messages if m.role in ("system", "developer", "user", "assistant")]
    text, usage = await answer_task(task, messages, services.llm, services.catalog)
    if usage.calls:
        yield UsageEvent(usage.prompt_tokens, usage.completion_tokens, usage.calls, "task")
    yield AnswerDelta(text)


def new_renderer(request: ChatCompletionRequest, services: Services, *, think: bool, openwebui: bool) -> ChunkRenderer:
    return ChunkRenderer(
        completion_id=completion_id(),
        created=now(),
        model=request.model,
        think_mode=services.settings.think_mode if think else "off",
        openwebui=openwebui,
    )
