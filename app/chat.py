"""A chat completion's response, from the request's events: streamed as SSE chunks or returned whole."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from app.chat_request import progress_mode, structured_format
from app.errors import APIError, default_code, error_body, event_status
from app.protocol import (
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    ResponseMessage,
    completion_id,
    now,
)
from app.request_record import RequestRecord
from app.services import Services
from app.sse import ChunkRenderer
from graph.answer.events import ErrorEvent, ThoughtEvent
from textkit.untrusted import no_surrogates

log = logging.getLogger(__name__)


def _sse(data: dict[str, Any]) -> dict[str, str]:
    """One SSE payload. Text from an upstream or a document can hold a lone surrogate (a JSON `\\ud800` escape
    decodes to one); sse-starlette encodes each payload as UTF-8 after this generator yielded it, where a failure
    could only cut the stream: it goes out as U+FFFD instead."""
    return {"data": no_surrogates(json.dumps(data, ensure_ascii=False, separators=(",", ":")))}


DONE = {"data": "[DONE]"}


async def stream_chat(
    renderer: ChunkRenderer, events: AsyncIterator[ThoughtEvent], include_usage: bool, record: RequestRecord
):
    """SSE payloads for sse-starlette: role chunk, think lines and answer as they come, finish, [DONE].

    Once the 200 and its headers are out, a failure can no longer change the status: whatever raises (the events,
    a cached answer being replayed, the renderer, the finish) ends the stream with an error event (`failure_chunks`:
    the think block closed first) and `[DONE]`, so a client always learns that and how the answer ended. A client
    that leaves (a cancellation) just ends it."""
    outcome = "disconnected"
    try:
        failed: ErrorEvent | None = None
        try:
            for chunk in renderer.start():
                yield _sse(chunk)
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
        except Exception as exc:
            log.exception("the answer stream failed")
            failed = ErrorEvent(f"internal error while streaming the answer ({type(exc).__name__})")
            for chunk in failure_chunks(renderer, failed):
                yield _sse(chunk)
        yield DONE
        outcome = default_code(event_status(failed.kind)) if failed else "ok"
    finally:
        record.done(outcome, renderer)


def failure_chunks(renderer: ChunkRenderer, failed: ErrorEvent) -> list[dict[str, Any]]:
    """The chunks that end a failed stream: the renderer's (think block closed, then the error event), or the bare
    error event when the renderer is what failed and fails again."""
    try:
        return renderer.error(failed.message, failed.kind)
    except Exception:
        log.exception("the error event could not be rendered")
        return [error_body(event_status(failed.kind), failed.message)]


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
                finish_reason=renderer.finish_reason,
                message=ResponseMessage(
                    content=renderer.answer_text,
                    reasoning_content=renderer.reasoning_text if renderer.think_mode != "off" else None,
                    annotations=renderer.annotations,
                )
            )
        ],
        usage=renderer.usage,
        citations=renderer.citations,
        search_results=renderer.search_results,
    )


def new_renderer(request: ChatCompletionRequest, services: Services, *, think: bool, openwebui: bool) -> ChunkRenderer:
    return ChunkRenderer(
        completion_id=completion_id(),
        created=now(),
        model=request.model,
        think_mode=progress_mode(request, services.settings.think_mode) if think else "off",
        openwebui=openwebui,
        annotate=not structured_format(request),
    )
