"""Renders typed thought events as OpenAI chat-completion chunks (and Open WebUI `event` lines).

One renderer per request. It also accumulates the think text and the answer, so the non-streaming path
uses the same rendering rules. Every piece of text passes the reasoning-tag neutraliser first. What documents
carry passes `textkit.untrusted` here, at the edge: a think line is written as Markdown-escaped text (titles,
queries and names in it are shown, never rendered as links, images or tags), and a source's title and link are
plain text and an http(s) link in every field that carries them (source events, `citations`, `search_results`,
annotations).
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from app.annotations import display_title, url_citations
from app.errors import error_body, event_status
from app.protocol import ChatCompletionChunk, ChunkChoice, DeltaMessage, SearchResult, UsageInfo
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
    SubAgentStatus,
    ThoughtEvent,
    Unsupported,
    UsageEvent,
)
from graph.answer.sanitize import TagNeutralizer, neutralize
from graph.text.claims import withdraw
from textkit.untrusted import markdown_text, no_surrogates, plain, safe_url

THINK_OPEN, THINK_CLOSE = "<think>\n", "</think>\n\n"


class ChunkRenderer:
    def __init__(self, *, completion_id: str, created: int, model: str, think_mode: str, openwebui: bool,
                 annotate: bool = True) -> None:
        self.id, self.created, self.model = completion_id, created, model
        self.think_mode = think_mode
        self.openwebui = openwebui
        self.annotate = annotate  # url_citation annotations (not for a JSON answer: its text is no prose)
        self.usage = UsageInfo()
        self.reasoning: list[str] = []
        self.answer: list[str] = []
        self._think_state = "closed" if think_mode == "off" else "new"  # new -> open -> closed
        self._answer_filter = TagNeutralizer()
        self.first_answer_at: float | None = None  # perf_counter() of the first answer text
        self.last_status = ""
        self.final_status = ""  # `Finished`: the closing entry of Open WebUI's progress list
        self.finish_reason = "stop"  # "length" when the answer stopped at the caller's max_tokens
        self.sources: list[SourceFound] = []  # the answer's cited documents, in the order it first cites them
        self.withdrawn: list[Unsupported] = []  # sentences the support check withdrew, with the stream's correction
        self._content_chars = 0  # what a stream's `content` holds so far
        self.answer_offset = 0  # where the answer starts in a stream's `content` (after a think block in tags)
        self._answer_chars = 0
        self._corrections: list[tuple[int, int]] = []  # where in the streamed answer the corrections stand

    # ------------------------------------------------------------ wire objects
    def _chunk(self, delta: DeltaMessage, finish: str | None = None, usage: UsageInfo | None = None,
               sources: bool = False) -> dict[str, Any]:
        choices = [] if usage is not None else [ChunkChoice(delta=delta, finish_reason=finish)]
        data = ChatCompletionChunk(
            id=self.id, created=self.created, model=self.model, choices=choices, usage=usage,
            citations=self.citations if sources else None, search_results=self.search_results if sources else None,
        ).model_dump(exclude={} if sources else {"citations", "search_results"})
        for choice in data["choices"]:
            choice["delta"] = {k: v for k, v in choice["delta"].items() if v is not None}
        return data

    def _content(self, text: str) -> dict[str, Any]:
        self._content_chars += len(text)
        return self._text_chunk("content", text)

    def _text_chunk(self, field: str, text: str) -> dict[str, Any]:
        """`_chunk` of a delta holding only `field`, built as a dict: the chunk a stream sends most (every answer
        piece and think line), at a tenth of the model's cost; a test holds it to `_chunk`'s output."""
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": {field: text}, "finish_reason": None, "logprobs": None}],
                "usage": None}

    @staticmethod
    def _status(description: str, done: bool = False) -> dict[str, Any]:
        return {"event": {"type": "status", "data": {"description": description, "done": done}}}

    # ------------------------------------------------------------ think block
    def _think(self, line: str) -> list[dict[str, Any]]:
        status = neutralize(plain(line))  # Open WebUI shows a status as text
        line = neutralize(markdown_text(line))  # the think block is rendered as Markdown
        self.reasoning.append(line)
        self.last_status = status
        out: list[dict[str, Any]] = []
        if self.openwebui:
            out.append(self._status(status))
        if self._think_state == "closed":
            return out
        if self.think_mode == "reasoning_content":
            self._think_state = "open"
            return out + [self._text_chunk("reasoning_content", line + "\n")]
        prefix = THINK_OPEN if self._think_state == "new" else ""
        self._think_state = "open"
        return out + [self._content(prefix + line + "\n")]

    def close_think(self) -> list[dict[str, Any]]:
        state, self._think_state = self._think_state, "closed"
        if state == "open" and self.think_mode == "tags":
            return [self._content(THINK_CLOSE)]
        return []

    # ------------------------------------------------------------ events
    def start(self) -> list[dict[str, Any]]:
        return [self._chunk(DeltaMessage(role="assistant", content=""))]

    def event(self, event: ThoughtEvent) -> list[dict[str, Any]]:
        if isinstance(event, Step):
            return self._think(event.text)
        if isinstance(event, Finished):
            self.final_status = neutralize(plain(event.text))
            return []
        if isinstance(event, SourceFound):
            return self._source(event)
        if isinstance(event, AnswerCut):
            self.finish_reason = "length"
            return []
        if isinstance(event, Unsupported):
            return self._withdraw(event)
        if isinstance(event, (SubAgentStatus, Degraded, LLMFallback, InstructionsIgnored)):
            return []  # the matching Step lines already tell the story in the think block
        if isinstance(event, (Searched, EchoVerdicts)):
            return []  # for the audit line and the metrics only
        if isinstance(event, UsageEvent):
            self.usage.add(event.step, event.prompt_tokens, event.completion_tokens, event.calls)
            return []
        if isinstance(event, AnswerDelta):
            text = self._answer_filter.feed(event.text)
            return self._answer_text(text)
        if isinstance(event, ErrorEvent):
            return self.error(event.message, event.kind)
        raise TypeError(f"unknown event {event!r}")

    def _source(self, event: SourceFound) -> list[dict[str, Any]]:
        """A cited document: kept for the citations, and an Open WebUI `source` event where those are sent."""
        # `Evidence` made these safe already; a source replayed from the cache may have been recorded before
        # (a Redis cache outlives a deploy by up to CACHE_TTL_S), so what goes out is made safe here too
        event = replace(event, title=plain(event.title), url=safe_url(event.url),
                        evidence_id=plain(event.evidence_id))
        self.sources.append(event)
        if not self.openwebui:
            return []
        # the title (with its page where the source has pages): Open WebUI numbers its sources panel
        # itself, and its `[n]` chips show the name (a "[n] " prefix read "1 [1] Title" in the panel)
        name = display_title(event)
        metadata: dict[str, Any] = {"source": event.evidence_id, "name": name, "url": event.url}
        if event.page is not None:
            metadata["page"] = event.page - 1  # Open WebUI counts pages from 0 (its link adds 1)
        return [
            {
                "event": {
                    "type": "source",
                    "data": {
                        "source": {"name": name, "id": event.evidence_id, "url": event.url},
                        "document": [neutralize(event.snippet)],
                        # Open WebUI numbers citations by distinct `metadata.source`: it must be unique per
                        # ledger entry (several entries can share a URL), so `[n]` opens the n-th source;
                        # the events come in the answer's numbering (`SourceFound.number`, first cited first)
                        "metadata": [metadata],
                    },
                }
            }
        ]

    def _withdraw(self, event: Unsupported) -> list[dict[str, Any]]:
        """Sentences the evidence does not support: the stream has sent them already, so it gets the correction
        that withdraws them; the whole answer (`answer_text`) leaves both out."""
        self.withdrawn.append(event)
        if not event.correction:
            return []
        start = self._answer_chars
        out = self._answer_text(neutralize(event.correction))
        self._corrections.append((start, self._answer_chars))
        return out

    def _answer_text(self, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        text = no_surrogates(text)  # a model's reply may decode to a lone surrogate: no response could encode it
        out = self.close_think()
        if self.first_answer_at is None:
            self.first_answer_at = time.perf_counter()
            self.answer_offset = self._content_chars
        self.answer.append(text)
        self._answer_chars += len(text)
        return out + [self._content(text)]

    def finish(self, include_usage: bool) -> list[dict[str, Any]]:
        out = self._answer_text(self._answer_filter.flush())
        out += self.close_think()
        if self.openwebui:  # Open WebUI lists every status: close it with what the answer rests on, not a repeat
            out.append(self._status(self.final_status or self.last_status, done=True))
        # on the finish chunk; Open WebUI turns each annotation into a source of its own: not when it has this
        # service's source events
        notes = [] if self.openwebui else self.streamed_annotations()
        out.append(self._chunk(DeltaMessage(annotations=notes or None), finish=self.finish_reason, sources=True))
        if include_usage:
            out.append(self._chunk(DeltaMessage(), usage=self.usage, sources=True))
        return out

    def error(self, message: str, kind: str = "server_error") -> list[dict[str, Any]]:
        """After the stream started: close the think block, then one in-band error event, with the `type` and
        `code` a non-streamed request gets for the same error (`app.errors`)."""
        out = self._answer_text(self._answer_filter.flush()) + self.close_think()
        out.append(error_body(event_status(kind), message))
        return out

    @property
    def citations(self) -> list[str]:
        """The cited documents' URLs, `citations[n - 1]` for `[n]` (Perplexity's field; "" for a document
        without one, so the positions still match)."""
        return [s.url for s in self._cited()]

    @property
    def search_results(self) -> list[SearchResult]:
        return [SearchResult(title=neutralize(s.title), url=s.url, date=str(s.year) if s.year else None,
                             snippet=neutralize(s.snippet), page=s.page) for s in self._cited()]

    def _cited(self) -> list[SourceFound]:
        return sorted({s.number: s for s in self.sources}.values(), key=lambda s: s.number)

    def streamed_annotations(self) -> list[dict[str, Any]]:
        """The `url_citation`s of the content a stream sent: the answer as it went out, after the think block,
        without the withdrawn sentences and the corrections that name them."""
        if not self.annotate:
            return []
        sentences = [s for event in self.withdrawn for s in event.sentences]
        return url_citations("".join(self.answer), self.sources, self.answer_offset, sentences, self._corrections)

    @property
    def annotations(self) -> list[dict[str, Any]]:
        """The `url_citation`s of the whole answer (`answer_text`), as a non-streamed message carries them."""
        return url_citations(self.answer_text, self.sources) if self.annotate else []

    @property
    def reasoning_text(self) -> str:
        return "\n".join(self.reasoning)

    @property
    def answer_text(self) -> str:
        """The whole answer, as a non-streamed response carries it: without withdrawn sentences."""
        text = "".join(self.answer)
        for event in self.withdrawn:
            text = withdraw(text, event.sentences, neutralize(event.correction))
        return text
