"""The pipeline's data types: what is retrieved, concluded and decided, with no behaviour and no clients (but the
invariants of what a document server sends: `Evidence` holds its metadata as plain text and its link as http(s); and
what a route says about its answer, `side_by_side` and `spread`, read by research and by the answer alike)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from textkit.untrusted import body, plain, safe_url

FILE_ID = re.compile(r"^file-[0-9a-f]{24}$")  # the library's file ids (`/v1/files/{id}`)

QueryType = Literal["factual", "exploratory", "deep_dive", "comparative"]
Language = Literal["nl", "en"]
Status = Literal["sufficient", "partial", "insufficient"]  # a verdict on the evidence gathered


class Evidence(BaseModel):
    """One retrieved passage; `id` (`collection/doc_id#n`) is stable across calls."""

    id: str
    collection: str
    doc_id: str
    title: str
    text: str
    url: str = ""
    year: int | None = None
    section: str = ""
    page: int | None = None  # the page of a paged source (PDF) it starts on, 1-based
    page_end: int | None = None  # and the one it ends on, when it runs over a page break
    relevance: float = 0.0
    summary: bool = False  # a paraphrase, not the official text of the source
    withheld: int = 0  # sentences addressed to the model taken out of it (`graph.text.injection.screen`)
    file_id: str = ""  # the library's original of its document (`/v1/files/{file_id}/content`), when it keeps one
    # its sentences that say what the query asks by meaning, with their cosine, best first: from a document server
    # that embeds sentences (`metadata.matching_sentences`, docserver/sentences.py); read by `graph.text.meaning`
    matching_sentences: list[tuple[str, float]] = Field(default_factory=list)

    @field_validator("id", "title", "section", "doc_id", "collection")
    @classmethod
    def _one_line(cls, value: str) -> str:
        """A document's metadata is somebody else's text: one line, no control characters (`textkit.untrusted`)."""
        return plain(value)

    @field_validator("text")
    @classmethod
    def _readable(cls, value: str) -> str:
        """A passage keeps its lines; the control characters and bidi overrides in it are taken out."""
        return body(value)

    @field_validator("url")
    @classmethod
    def _web_link(cls, value: str) -> str:
        """A link from a document is kept only as an http(s) link: a `javascript:` or `data:` URL is dropped."""
        return safe_url(value)

    @field_validator("file_id")
    @classmethod
    def _library_file(cls, value: str) -> str:
        return value if FILE_ID.fullmatch(value) else ""

    @model_validator(mode="after")
    def _own_sentences(self) -> Evidence:
        """A matching sentence is kept only when the passage holds it (whitespace aside) and its cosine is a number
        from -1 to 1: a server cannot make the agent quote what its passage does not say."""
        self.matching_sentences = [(sentence, cosine) for sentence, cosine in self.matching_sentences
                                   if -1.0 <= cosine <= 1.0 and holds_sentence(self.text, sentence)]
        return self


def holds_sentence(text: str, sentence: str) -> bool:
    """Whether `text` holds `sentence`, whitespace folded in both (a passage's sentence keeps its line breaks)."""
    folded = " ".join(sentence.split())
    return bool(folded) and folded in " ".join(text.split())


class Fact(BaseModel):
    text: str
    evidence_ids: list[str] = Field(default_factory=list)


class Route(BaseModel):
    query_type: QueryType
    collections: list[str]
    reason: str  # the signal that decided the type ("model" when the fast model classified the question)
    signal_words: str = ""  # the question's own words that matched that signal (quoted in the think block)
    search_query: str = ""  # the question without routing words (collection names, type signals)
    confidence: float = 1.0  # how sure the heuristics are of the type (0..1; below 1 a model may decide)
    preferred: list[str] = Field(default_factory=list)  # named by the question: first, with a raised prior
    evidence: list[QueryType] = Field(default_factory=list)  # the types the question holds a signal of


def side_by_side(route: Route) -> bool:
    """Whether a comparison's sides are collections: the question names two or more of them by name. Those are
    researched by one sub-agent per side and answered side by side. A comparison of other things (two
    people, two plants, two magazines: "Which is older, A or B?") is researched as one question about several
    names, over every collection: collections are where documents live, not what is being compared."""
    return route.query_type == "comparative" and len(route.preferred) >= 2


def spread(route: Route) -> bool:
    """Whether an answer spreads over its sources (overviews, deep dives, comparisons of sources: every consulted
    source represented) rather than focusing on the few passages that answer one thing."""
    return route.query_type in ("exploratory", "deep_dive") or side_by_side(route)


class ResearchTask(BaseModel):
    """One unit of research: a query against one collection, optionally condensed by a sub-agent."""

    id: str
    collection: str
    query: str
    label: str
    condense: bool = True  # comparative sub-agents condense their own facts; factual evidence is summarised once
    doc_ids: list[str] = Field(default_factory=list)  # exploratory: focus on these documents
    depth: int = 1  # corrective rounds look further down the ranking
    limit: int = 6  # passages kept from the search
    after: str | None = None  # id of a task whose findings this one needs first (runs in a later round)
    extra: list[str] = Field(default_factory=list)  # more queries on the same collection (names searched alone)

    @property
    def queries(self) -> list[str]:
        return [self.query, *self.extra]


class Verdict(BaseModel):
    status: Status
    missing: list[str] = Field(default_factory=list)
    queries: dict[str, str] = Field(default_factory=dict)  # task id -> refined query
    judged_by: Literal["coverage", "llm", "rules"] = "rules"


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            calls=self.calls + other.calls,
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Turn(BaseModel):
    role: Literal["user", "assistant"]
    content: str


class Outcome(BaseModel):
    """What one research sub-agent did with its task: the loop reads coverage and failures from these."""

    task_id: str
    collection: str
    facts: int = 0  # facts the sub-agent condensed (0 when its evidence is summarised later)
    error: str = ""  # the search failed: the collection is not retried and the answer names the gap
