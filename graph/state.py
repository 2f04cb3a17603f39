"""Pipeline state, evidence ledger types and the run-scoped context.

State holds data only; clients live in `Context`, which LangGraph injects into nodes as
`runtime.context` (created once per process and passed per run, never imported as globals).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal, TypedDict

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    from graph.collections import Collection
    from graph.llm import LLMClient
    from graph.mcp_client import DocumentClient
    from graph.prompts import Prompts

QueryType = Literal["factual", "exploratory", "deep_dive", "comparative"]
Language = Literal["nl", "en"]


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
    relevance: float = 0.0
    summary: bool = False  # a paraphrase, not the official text of the source


class Fact(BaseModel):
    text: str
    evidence_ids: list[str] = Field(default_factory=list)


class Route(BaseModel):
    query_type: QueryType
    collections: list[str]
    reason: str
    search_query: str = ""  # the question without routing words (collection names, type signals)
    sub_questions: list[str] = Field(default_factory=list)


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def __add__(self, other: "Usage") -> "Usage":
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


def merge_evidence(left: list[Evidence], right: list[Evidence]) -> list[Evidence]:
    """Reducer: append new evidence, drop ids already present (parallel branches may overlap)."""
    seen = {e.id for e in left}
    return left + [e for e in right if e.id not in seen and not seen.add(e.id)]  # type: ignore[func-returns-value]


class State(TypedDict, total=False):
    question: str
    history: list[Turn]
    language: Language
    system_hint: str
    route: Route
    evidence: Annotated[list[Evidence], merge_evidence]
    facts: Annotated[list[Fact], operator.add]
    gaps: Annotated[list[str], operator.add]
    answer: str
    usage: Annotated[Usage, operator.add]


class SearchTask(TypedDict):
    """Input of one parallel retrieval branch (sent with LangGraph `Send`)."""

    collection: str
    query: str
    language: Language


@dataclass(frozen=True, slots=True)
class Context:
    """Run-scoped dependencies, injected as `runtime.context`."""

    llm: "LLMClient | None"  # None = offline (extractive) mode
    docs: "DocumentClient"
    collections: "list[Collection]"
    prompts: "Prompts"
    top_k: int = 6
    max_facts: int = 8

    def display(self, name: str) -> str:
        return next((c.display_name for c in self.collections if c.name == name), name)
