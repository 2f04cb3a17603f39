"""Typed thought events. Nodes `emit` them to the run's consumer (`graph.runner.run_pipeline`, or LangGraph's
custom stream when the graph runs without it); the HTTP edge renders them.

Nodes never format SSE or protocol text: a `Step` is a curated, user-facing progress line in the
user's language, never a prompt, JSON or raw model output.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from typing import Literal

from langgraph.config import get_stream_writer


@dataclass(frozen=True, slots=True)
class Step:
    """A progress line for the think block ("Route: feitelijke vraag ...")."""

    text: str


@dataclass(frozen=True, slots=True)
class SubAgentStatus:
    """Progress of one research branch (one collection or sub-question)."""

    agent: str
    status: Literal["started", "done", "failed"]
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SourceFound:
    """A ledger entry that the answer may cite as [number]."""

    number: int
    title: str
    collection: str
    url: str
    evidence_id: str
    snippet: str = ""
    year: int | None = None
    page: int | None = None  # the first page of a paged source the cited passage stands on (1-based)
    pages: str = ""  # where it stands, as a reader says it: "p. 6", "pp. 6-7" ("" without pages)


@dataclass(frozen=True, slots=True)
class Finished:
    """What the finished answer rests on, one line ("Klaar: antwoord met 3 geciteerde bronnen"): the closing
    entry of a UI's progress list, where repeating the last progress line would read as a step done twice."""

    text: str


@dataclass(frozen=True, slots=True)
class AnswerDelta:
    text: str


@dataclass(frozen=True, slots=True)
class AnswerCut:
    """The model's answer stopped at the caller's `max_tokens` (OpenAI's `finish_reason: "length"`)."""


@dataclass(frozen=True, slots=True)
class UsageEvent:
    """What one upstream model call cost; `step` names the pipeline step that made it (route, judge,
    synthesize, task, ...), so usage, metrics and logs can say where the tokens went."""

    prompt_tokens: int
    completion_tokens: int
    calls: int = 1
    step: str = ""
    seconds: float = 0.0  # from the request to the reply's last token (where a model-mode answer's time goes)


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    message: str
    kind: str = "server_error"
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Degraded:
    """Something fell back or could not be searched: the answer stays honest but is not cached."""

    reason: str


@dataclass(frozen=True, slots=True)
class LLMFallback:
    """A model step whose deterministic strategy took over: the model was `unavailable` (connection, 5xx,
    timeout) or its reply was `invalid` (empty, not the schema, or meaning that does not hold)."""

    step: str
    reason: Literal["unavailable", "invalid"]


@dataclass(frozen=True, slots=True)
class Unsupported:
    """Answer sentences whose cited passages do not back them (listed after the answer)."""

    sentences: tuple[str, ...]
    correction: str = ""  # streamed after the answer; a non-streamed answer leaves the sentences out instead


@dataclass(frozen=True, slots=True)
class InstructionsIgnored:
    """Passages that held sentences addressed to the model, per collection (`graph.text.injection`), for the
    `neo_injection_suspected_total{collection}` metric; the think block says it in one line."""

    collections: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Searched:
    """The collections the route sends research to, for the request's audit line (docs/, "Collections
    per caller"); never shown. `cached`: the answer was replayed from the response cache, researched in these
    collections earlier."""

    collections: tuple[str, ...]
    cached: bool = False


@dataclass(frozen=True, slots=True)
class EchoVerdicts:
    """What the prompt-echo guard (`graph.answer.answer_stream.EchoGate`) made of one answer call's lines: `copy`
    (a prompt line, dropped), `trimmed` (a copied label or question cut off, the rest kept), `answer` (kept)."""

    step: str
    copy: int
    trimmed: int
    answer: int

    def counts(self) -> dict[str, int]:
        """Lines by verdict (`ECHO_VERDICTS`)."""
        return {verdict: getattr(self, verdict) for verdict in ECHO_VERDICTS}


ECHO_VERDICTS = ("copy", "trimmed", "answer")


ThoughtEvent = (Step | SubAgentStatus | SourceFound | AnswerDelta | AnswerCut | UsageEvent | ErrorEvent | Degraded
                | LLMFallback | Unsupported | InstructionsIgnored | Finished | Searched | EchoVerdicts)


Sink = Callable[[ThoughtEvent], None]
_sink: ContextVar[Sink | None] = ContextVar("thought_sink", default=None)


def emit(event: ThoughtEvent) -> None:
    """Send an event to the consumer of the running graph: the sink `run_pipeline` set for its run (`send_to`), or
    else LangGraph's custom stream (a no-op outside a streaming run)."""
    sink = _sink.get()
    if sink is not None:
        sink(event)
    else:
        get_stream_writer()(event)


def send_to(queue: asyncio.Queue) -> None:
    """From here on, in this task and the tasks it starts (the graph's node tasks copy its context), events go
    straight into `queue`. LangGraph's custom stream hands every chunk over with `call_soon_threadsafe` (a wake-up
    of the event loop through its self-pipe, then a task hop to the stream's reader and one more to this queue's):
    for one streamed factual answer (strace, bench fakes) 703 event-loop iterations and 129 writes against 523
    and 77 without it. An event emitted from a worker thread (a sync node) is still handed over thread-safely."""
    loop, owner = asyncio.get_running_loop(), threading.get_ident()

    def put(event: ThoughtEvent) -> None:
        if threading.get_ident() == owner:
            queue.put_nowait(event)
        else:
            loop.call_soon_threadsafe(queue.put_nowait, event)

    _sink.set(put)


def degrade(reason: str, line: str | None = None) -> None:
    """Report a fallback or failure: an optional progress line, and a `Degraded` marker."""
    if line:
        emit(Step(line))
    emit(Degraded(reason))


_TYPES = {cls.__name__: cls for cls in (Step, SubAgentStatus, SourceFound, AnswerDelta, AnswerCut, UsageEvent, ErrorEvent,
                                        Degraded, LLMFallback, Unsupported, InstructionsIgnored, Finished, Searched,
                                        EchoVerdicts)}


def to_record(event: ThoughtEvent) -> dict:
    return {"type": type(event).__name__, **asdict(event)}


def from_record(record: dict) -> ThoughtEvent:
    fields = dict(record)
    kind = _TYPES[fields.pop("type")]
    if kind is Searched:  # JSON has no tuples
        fields["collections"] = tuple(fields["collections"])
    return kind(**fields)
