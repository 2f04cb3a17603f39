"""Where a chat request's events come from: the pipeline, through the response cache, or a background task."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, replace

from app.protocol import ChatCompletionRequest
from app.services import Services
from app.tasks import answer_task
from graph.answer import messages
from graph.answer.events import (
    AnswerCut,
    AnswerDelta,
    Degraded,
    ErrorEvent,
    Finished,
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

log = logging.getLogger("app.chat")  # a failed run is logged under the logger it always had

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
            for event in _replayed(hit, turns):
                yield event
            return
    recording = Recording(settings.response_cache)
    try:
        async with asyncio.timeout(settings.request_timeout_s):
            async for event in run_pipeline(services.graph, state, context, max_concurrency=settings.research_concurrency):
                recording.add(event)
                yield event
        if recording.cacheable:
            evidence = None if catalog.holdings is not None else await _evidence_key(state, context)
            await services.cache.set(key, recording.entry(evidence), settings.cache_ttl_s)
    except TimeoutError:
        yield ErrorEvent(f"request timed out after {services.settings.request_timeout_s:.0f}s", "timeout")
    except LLMError as exc:  # only where no honest partial answer exists: a JSON answer the model could not write
        yield ErrorEvent(f"the upstream model failed: {exc}", "upstream")
    except Exception as exc:  # a bug must not become a hung or broken stream
        log.exception("pipeline failed")
        yield ErrorEvent(f"internal error in the pipeline ({type(exc).__name__})")


def _replayed(hit: dict, turns: list[Turn]) -> Iterator[ThoughtEvent]:
    """A cached answer's events as they go out again: a line that says so first, the searches marked cached."""
    yield Step(messages.line("cached", detect_language(turns[-1].content)))
    for record in hit.get("events", []):
        event = from_record(record)
        yield replace(event, cached=True) if isinstance(event, Searched) else event


class Recording:
    """What the response cache keeps of one pipeline run: the events a replay sends (the answer's deltas joined
    into one), and whether the answer may be kept at all (complete and undegraded)."""

    def __init__(self, cacheable: bool) -> None:
        self.cacheable = cacheable
        self.events: list[ThoughtEvent] = []

    def add(self, event: ThoughtEvent) -> None:
        self.cacheable = self.cacheable and not isinstance(event, (Degraded, ErrorEvent))
        if isinstance(event, AnswerDelta) and self.events and isinstance(self.events[-1], AnswerDelta):
            self.events[-1] = AnswerDelta(self.events[-1].text + event.text)
        elif isinstance(event, _REPLAYED):
            self.events.append(event)

    def entry(self, evidence: str | None) -> dict:
        """The cache entry: the events, and the evidence key a replay is checked against (None: not checked)."""
        return {"events": [to_record(e) for e in self.events], "evidence": evidence}


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


async def task_events(services: Services, catalog: Catalog, task: str, request: ChatCompletionRequest
                      ) -> AsyncIterator[ThoughtEvent]:
    """A background task's answer; `catalog`: the collections the caller may see (follow-ups and tags name them)."""
    messages = [{"role": m.role if m.role != "developer" else "system", "content": m.text()}
                for m in request.messages if m.role in ("system", "developer", "user", "assistant")]
    text, usage = await answer_task(task, messages, services.llm, catalog)
    if usage.calls:
        yield UsageEvent(usage.prompt_tokens, usage.completion_tokens, usage.calls, "task")
    yield AnswerDelta(text)

