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
    from graph.cache import Cache
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


class Verdict(BaseModel):
    status: Literal["sufficient", "partial", "insufficient"]
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


def merge_evidence(left: list[Evidence], right: list[Evidence]) -> list[Evidence]:
    """Reducer: append new evidence, drop ids already present (parallel branches may overlap)."""
    seen = {e.id for e in left}
    return left + [e for e in right if e.id not in seen and not seen.add(e.id)]  # type: ignore[func-returns-value]


def merge_facts(left: list[Fact], right: list[Fact]) -> list[Fact]:
    """Reducer: append facts not seen before (same text and evidence)."""
    seen = {(f.text, tuple(f.evidence_ids)) for f in left}
    return left + [f for f in right if (f.text, tuple(f.evidence_ids)) not in seen]


class State(TypedDict, total=False):
    question: str
    history: list[Turn]
    language: Language
    route: Route
    documents: list[dict]  # exploratory/deep-dive: list_documents hits
    tasks: list[ResearchTask]  # the current round's research tasks
    pending: list[ResearchTask]  # planned tasks waiting for another task's findings
    round: int
    evidence_seen: int  # ledger size before the current round (no-new-evidence stop)
    verdict: Verdict
    stop_reason: str
    deadline: float  # time.monotonic() by which research must stop
    evidence: Annotated[list[Evidence], merge_evidence]
    facts: Annotated[list[Fact], merge_facts]
    covered: Annotated[list[str], operator.add]  # task ids whose research produced facts
    failed: Annotated[list[str], operator.add]  # collections whose document search failed (not retried)
    gaps: Annotated[list[str], operator.add]
    answer: str
    usage: Annotated[Usage, operator.add]


@dataclass(frozen=True, slots=True)
class Context:
    """Run-scoped dependencies, injected as `runtime.context`."""

    llm: LLMClient | None  # None = offline (extractive) mode
    docs: DocumentClient
    collections: list[Collection]
    prompts: Prompts
    top_k: int = 6
    max_facts: int = 8
    facts_per_agent: int = 4
    max_iterations: int = 3
    token_budget: int = 60_000
    claim_check: str = "auto"  # auto | on | off
    research_seconds: float = 60.0  # time budget for research rounds
    ledger_limit: int = 12  # evidence entries the answer may cite
    stream_interval_s: float = 0.0  # answer deltas closer together than this are sent as one (0 = every delta)
    min_coverage: float = 0.6  # share of topic words a passage must contain for a factual answer (offline)
    cache: Cache | None = None  # plan cache (routes, decompositions, rewrites made by the model)
    cache_ttl_s: float = 3600.0
    tenant: str = "anonymous"  # hashed API key: cached plans are never shared across keys
    fingerprint: str = ""  # configuration and prompt version: a change invalidates cached plans

    async def cached(self, kind: str, key: object, compute):
        """`compute()` -> (value, usage), memoised in the plan cache under (kind, tenant, fingerprint, key)."""
        from graph.cache import cache_key
        from graph.state import Usage

        if self.cache is None:
            return await compute()
        name = cache_key(kind, self.tenant, self.fingerprint, key)
        hit = await self.cache.get(name)
        if hit is not None:
            return hit, Usage()
        value, usage = await compute()
        if value is not None:
            await self.cache.set(name, value, self.cache_ttl_s)
        return value, usage

    def display(self, name: str) -> str:
        return next((c.display_name for c in self.collections if c.name == name), name)
