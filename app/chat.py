"""One chat-completion request: validation, state, pipeline run, and rendering (streamed or not)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, replace
from typing import Any

import jsonschema
from starlette.requests import Request

from app.access import Caller
from app.errors import APIError, default_code, error_body, event_status, model_not_found
from app.filters import search_filters
from app.observability import Metrics
from app.protocol import (
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    ResponseMessage,
    completion_id,
    now,
)
from app.services import Services
from app.sse import ChunkRenderer
from app.tasks import answer_task
from graph.answer import messages
from graph.answer.events import (
    AnswerCut,
    AnswerDelta,
    Degraded,
    EchoVerdicts,
    ErrorEvent,
    Finished,
    InstructionsIgnored,
    LLMFallback,
    Searched,
    SourceFound,
    Step,
    ThoughtEvent,
    Unsupported,
    UsageEvent,
    from_record,
    to_record,
)
from graph.clients.cache import cache_key
from graph.clients.llm import LLMError
from graph.clients.mcp_client import DocumentError
from graph.collections import Catalog
from graph.context import AnswerOptions, Context
from graph.models import Turn
from graph.nodes.search import first_round
from graph.runner import run_pipeline, start
from graph.state import State
from graph.text.language import detect_language
from textkit.untrusted import no_surrogates

log = logging.getLogger(__name__)
audit_log = logging.getLogger("neo_nl.audit")

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
        raise model_not_found(request.model)
    refused = unsupported_field(request, offline=settings.offline)
    if refused is not None:
        raise APIError(400, refused[1], param=refused[0], code="unsupported_value")
    if len(request.messages) > settings.max_messages:
        raise APIError(400, f"at most {settings.max_messages} messages are accepted", param="messages",
                       code="too_many_messages")
    for i, message in enumerate(request.messages):
        if len(message.text()) > settings.max_message_chars:
            raise APIError(
                400, f"message {i} is longer than {settings.max_message_chars} characters", param=f"messages.{i}.content",
                code="context_length_exceeded")


EFFORTS = {"none": "low", "minimal": "low", "low": "low", "medium": "medium", "high": "high"}  # -> research depth
JSON_HINT_CHARS = 2000


def requested_effort(request: ChatCompletionRequest) -> str | None:
    """`reasoning_effort`, or OpenRouter's `reasoning.effort`."""
    return request.reasoning_effort or (request.reasoning.effort if request.reasoning else None)


def answer_options(request: ChatCompletionRequest) -> AnswerOptions:
    """The request fields that change the answer (README, "Request fields"), for the pipeline's answer call."""
    fmt = request.response_format or {}
    schema: dict | None = None
    if fmt.get("type") == "json_schema":
        schema = fmt["json_schema"]["schema"]
    elif fmt.get("type") == "json_object":
        schema = {"type": "object"}
    hint = ""
    if schema is not None:  # the caller's own description of the JSON often sits in its system message
        hint = "\n".join(m.text() for m in request.messages if m.role in ("system", "developer"))[:JSON_HINT_CHARS]
    stop = (request.stop,) if isinstance(request.stop, str) else tuple(request.stop or ())
    effort = requested_effort(request)
    return AnswerOptions(
        max_tokens=request.max_completion_tokens or request.max_tokens, stop=stop, temperature=request.temperature,
        top_p=request.top_p, seed=request.seed, json_schema=schema, json_hint=hint.strip(),
        depth=EFFORTS[effort] if effort else None, filters=search_filters(request.filters),
    )


def unsupported_field(request: ChatCompletionRequest, *, offline: bool) -> tuple[str, str] | None:
    """The first request field this service cannot honour and will not silently ignore (param, message): what
    it would return is not what the caller asked for. Fields that are harmless to ignore are listed in the
    README's table, with the reason."""
    if request.n not in (None, 1):
        return "n", "only n=1 is supported"
    if request.logprobs or request.top_logprobs:
        field = "logprobs" if request.logprobs else "top_logprobs"
        return field, "log probabilities are not available: the answer is assembled from several model calls"
    if request.audio is not None or "audio" in (request.modalities or []):
        return ("audio" if request.audio is not None else "modalities"), "only text output is supported"
    choice = request.tool_choice
    if choice == "required" or isinstance(choice, dict):
        return "tool_choice", "this service never calls tools; tool_choice can only be 'auto' or 'none'"
    effort = requested_effort(request)
    if effort is not None and effort not in EFFORTS:
        param = "reasoning_effort" if request.reasoning_effort else "reasoning.effort"
        return param, f"reasoning_effort must be one of {', '.join(EFFORTS)}"
    fmt = request.response_format or {}
    kind, spec = fmt.get("type"), fmt.get("json_schema")
    if kind not in (None, "text", "json_object", "json_schema"):
        return "response_format.type", f"unknown response_format type '{kind}'"
    if kind == "json_schema" and not (isinstance(spec, dict) and isinstance(spec.get("schema"), dict)):
        return "response_format.json_schema", "response_format json_schema needs a 'json_schema.schema' object"
    if kind == "json_schema":
        try:
            jsonschema.validators.validator_for(spec["schema"]).check_schema(spec["schema"])
        except jsonschema.SchemaError as exc:
            return "response_format.json_schema.schema", f"not a valid JSON schema: {exc.message}"
    if structured_format(request) and offline:
        return "response_format", ("a JSON answer needs a model and this service runs offline (no LLM_BASE_URL): "
                                   "only the extractive text answer is available")
    return None


_REPLAYED = (Step, SourceFound, AnswerDelta, AnswerCut, Unsupported, Finished, Searched)


async def pipeline_events(
    services: Services, context: Context, turns: list[Turn], tenant: str, model: str,
    answer: AnswerOptions | None = None,
) -> AsyncIterator[ThoughtEvent]:
    """The pipeline's events, bounded by REQUEST_TIMEOUT_S; failures become one ErrorEvent. `context`: the
    caller's (`Services.context_for`: the collections it may see).

    A complete, undegraded answer is kept in the response cache; the same conversation from the same API
    key, seeing the same collections, then replays it (think lines, sources, answer) without running the
    pipeline. The collections are part of the key: an answer researched for a user behind a key who may see more
    is never replayed to one who may see less. So is what they hold (`Catalog.holdings`, the library's version of
    each): once a document is added to or removed from one of them, the question is researched again. A library
    that does not say what its collections hold (an external server without versions) has the cached answer checked
    against the evidence instead: the first research round is run again (searching costs milliseconds, the model
    call is what the cache saves) and the answer replayed only when it finds the same passages."""
    settings = services.settings
    answer = answer or AnswerOptions()
    catalog = context.catalog
    key = cache_key("answer", tenant, catalog.names, catalog.described, catalog.holdings, model, services.fingerprint,
                    [(t.role, " ".join(t.content.split())) for t in turns], asdict(answer))
    state, context = start(turns, context, tenant, answer)
    if settings.response_cache:
        hit = await services.cache.get(key)
        if isinstance(hit, dict) and await _still_holds(hit.get("evidence"), state, context):
            yield Step(messages.line("cached", detect_language(turns[-1].content)))
            for record in hit.get("events", []):
                event = from_record(record)
                yield replace(event, cached=True) if isinstance(event, Searched) else event
            return
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
            evidence = None if catalog.holdings is not None else await _evidence_key(state, context)
            await services.cache.set(key, {"events": [to_record(e) for e in recorded], "evidence": evidence},
                                     settings.cache_ttl_s)
    except TimeoutError:
        yield ErrorEvent(f"request timed out after {services.settings.request_timeout_s:.0f}s", "timeout")
    except LLMError as exc:  # only where no honest partial answer exists: a JSON answer the model could not write
        yield ErrorEvent(f"the upstream model failed: {exc}", "upstream")
    except Exception as exc:  # a bug must not become a hung or broken stream
        log.exception("pipeline failed")
        yield ErrorEvent(f"internal error in the pipeline ({type(exc).__name__})")


async def _evidence_key(state: State, context: Context) -> str | None:
    """A hash of the passages the first research round finds (ids and text), or None when it fails."""
    try:
        found = await first_round(state, context)
    except DocumentError:
        return None
    return cache_key("evidence", sorted((e.id, e.text) for e in found))


async def _still_holds(evidence: str | None, state: State, context: Context) -> bool:
    """Whether a cached answer may be replayed: the library says what the collections hold (then the key says it
    all), or the first research round finds the passages it found when the answer was made."""
    if context.catalog.holdings is not None:
        return True
    return evidence is not None and await _evidence_key(state, context) == evidence


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


class RequestRecord:
    """Metrics and the audit line of one chat request, recorded once when it ends (however it ends)."""

    def __init__(self, metrics: Metrics, kind: str, streamed: bool, caller: Caller | None = None,
                 visible: tuple[str, ...] = ()) -> None:
        self.metrics, self.kind, self.streamed, self.started = metrics, kind, streamed, time.perf_counter()
        self.audit = Audit(caller or Caller(), visible)
        metrics.in_flight.inc()

    def observe(self, event: ThoughtEvent) -> None:
        self.audit.observe(event)
        if isinstance(event, LLMFallback):
            self.metrics.fallbacks.labels(event.step, event.reason).inc()
        elif isinstance(event, Unsupported):
            self.metrics.unsupported.inc(len(event.sentences))
        elif isinstance(event, EchoVerdicts):
            for verdict, n in event.counts().items():
                self.metrics.echo.labels(event.step, verdict).inc(n)
        elif isinstance(event, InstructionsIgnored):
            for collection, n in event.collections:
                self.metrics.injection.labels(collection).inc(n)

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
        self.audit.log(self.kind, outcome)


class Audit:
    """Who asked, which collections research searched and which documents the answer cited: one line per chat
    request on the `neo_nl.audit` logger (README, Collections per caller). The key id, never the API key, and
    never the user token."""

    def __init__(self, caller: Caller, visible: tuple[str, ...]) -> None:
        self.caller, self.visible = caller, visible
        self.searched: tuple[str, ...] = ()
        self.cached = False
        self.cited: dict[str, dict[str, str]] = {}  # by evidence id, in citation order

    def observe(self, event: ThoughtEvent) -> None:
        if isinstance(event, Searched):
            self.searched, self.cached = event.collections, event.cached
        elif isinstance(event, SourceFound):
            self.cited.setdefault(event.evidence_id, {"collection": event.collection, "title": event.title,
                                                      "url": event.url})

    def fields(self, kind: str, outcome: str) -> dict[str, Any]:
        user = self.caller.user
        return {
            "kind": kind, "outcome": outcome, "key_id": self.caller.key_id,
            "user": {"sub": user.sub, "email": user.email, "role": user.role, "groups": list(user.groups)} if user
            else None,
            "identity": user.source if user else None,
            "collections_visible": list(self.visible), "collections_searched": list(self.searched),
            "from_cache": self.cached, "documents_cited": list(self.cited.values()),
        }

    def log(self, kind: str, outcome: str) -> None:
        fields = self.fields(kind, outcome)
        user = self.caller.user
        who = f"key {self.caller.key_id}" + (f", user {user.email or user.sub} ({user.source})" if user else "")
        searched = ", ".join(self.searched) or "nothing"
        cited = "; ".join(d["title"] for d in fields["documents_cited"]) or "nothing"
        audit_log.info("%s %s by %s: searched %s%s; cited %s", kind, outcome, who, searched,
                       " (cached answer)" if self.cached else "", cited, extra={"audit": fields})


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


async def task_events(services: Services, catalog: Catalog, task: str, request: ChatCompletionRequest
                      ) -> AsyncIterator[ThoughtEvent]:
    """A background task's answer; `catalog`: the collections the caller may see (follow-ups and tags name them)."""
    messages = [{"role": m.role if m.role != "developer" else "system", "content": m.text()}
                for m in request.messages if m.role in ("system", "developer", "user", "assistant")]
    text, usage = await answer_task(task, messages, services.llm, catalog)
    if usage.calls:
        yield UsageEvent(usage.prompt_tokens, usage.completion_tokens, usage.calls, "task")
    yield AnswerDelta(text)


def progress_mode(request: ChatCompletionRequest, default: str) -> str:
    """Where this request's progress lines go: `default` (THINK_MODE) unless the request says otherwise with
    OpenRouter's conventions: `reasoning: {"exclude": true}` (or `"enabled": false`) or `include_reasoning: false`,
    nowhere;
    any other `reasoning` object or `include_reasoning: true`, `reasoning_content` (a client that asks for
    reasoning reads it as a field, not as tags in the content). A structured `response_format` never gets
    tags: its content must be the JSON document alone."""
    options = request.reasoning
    if (options and (options.exclude or options.enabled is False)) or request.include_reasoning is False:
        return "off"
    if options is not None or request.include_reasoning:
        return "reasoning_content"
    if default == "tags" and structured_format(request):
        return "reasoning_content"
    return default


def structured_format(request: ChatCompletionRequest) -> bool:
    """Whether the request asks for a JSON answer (`json_object` or `json_schema`)."""
    kind = (request.response_format or {}).get("type")
    return kind in ("json_object", "json_schema")


def new_renderer(request: ChatCompletionRequest, services: Services, *, think: bool, openwebui: bool) -> ChunkRenderer:
    return ChunkRenderer(
        completion_id=completion_id(),
        created=now(),
        model=request.model,
        think_mode=progress_mode(request, services.settings.think_mode) if think else "off",
        openwebui=openwebui,
        annotate=not structured_format(request),
    )
