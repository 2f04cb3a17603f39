"""The run's context: clients and configuration, built once per process; per request only its own facts.

LangGraph injects it into nodes as `runtime.context`. State holds data only; nothing here is state.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from opentelemetry.trace import Tracer

from graph.answer.prompts import Prompts
from graph.clients.cache import Cache, cache_key
from graph.clients.llm import LLMClient
from graph.clients.mcp_client import Documents
from graph.clients.tracing import NOOP
from graph.collections import Catalog
from graph.config import PipelineConfig
from graph.models import Evidence, Language, Usage

Depth = Literal["low", "medium", "high"] | None


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """The request's `filters` (docs/API.md, "Filters and search"). `collections` and `language` narrow the caller's
    catalog before the run (`app.filters`), so routing, research and every message see only what is left; `kind`
    keeps the passages of every search that are official texts, or only the summaries."""

    collections: tuple[str, ...] = ()  # as the request named them
    kind: Literal["official", "summary"] | None = None
    language: Language | None = None

    def __bool__(self) -> bool:
        return bool(self.collections or self.kind or self.language)

    def admits(self, evidence: Evidence) -> bool:
        return self.kind is None or evidence.summary == (self.kind == "summary")


@dataclass(frozen=True, slots=True)
class AnswerOptions:
    """What the caller asked of the answer (the OpenAI request fields that change it), for the answer call only:
    the research steps keep their own settings, except for the research depth and the search filters."""

    max_tokens: int | None = None  # `max_completion_tokens` / `max_tokens`: the answer text at most
    stop: tuple[str, ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    json_schema: dict[str, Any] | None = None  # `response_format`: a JSON answer valid for this schema
    json_hint: str = ""  # the caller's own words about the JSON (its system messages), for `json_object`
    depth: Depth = None  # `reasoning_effort`: low = the cheapest path, high = the full loop, medium/None = adaptive
    filters: SearchFilters = SearchFilters()

    @property
    def structured(self) -> bool:
        return self.json_schema is not None

    @property
    def optional_steps(self) -> bool:
        """Whether the model steps the evidence may ask for (routing, condensing, decomposing, judging) may run:
        not at depth "low", the cheapest path."""
        return self.depth != "low"

    def sampling(self) -> dict[str, Any]:
        """The sampling fields the caller set, as the upstream request takes them."""
        fields = {"temperature": self.temperature, "top_p": self.top_p, "seed": self.seed,
                  "stop": list(self.stop) or None}
        return {k: v for k, v in fields.items() if v is not None}


@dataclass(frozen=True, slots=True)
class Context:
    llm: LLMClient | None  # None = offline (extractive) mode
    # A caller sees the collections it may search and no others (docs/SECURITY.md, Collections per caller):
    # `Services.context_for` gives each set of visible collections its own catalog and document view
    docs: Documents
    catalog: Catalog
    prompts: Prompts
    config: PipelineConfig = PipelineConfig()
    cache: Cache | None = None  # plan cache
    fingerprint: str = ""  # configuration and prompt version: a change invalidates cached plans
    # the deployment's key for the passage fences of a request with a `seed` (FENCE_KEY; random per process)
    fence_key: bytes = field(default_factory=lambda: secrets.token_bytes(16))
    tracer: Tracer = NOOP  # the nodes' spans (`graph/clients/tracing.py`); a no-op tracer unless tracing is configured
    # per request
    tenant: str = "anonymous"  # hashed API key: cached plans are never shared across keys
    language: Language = "nl"  # the language of the question, and so of every line and the answer
    deadline: float = math.inf  # time.monotonic() after which no further research round starts
    answer: AnswerOptions = AnswerOptions()

    def for_request(self, *, language: Language, tenant: str = "anonymous",
                    answer: AnswerOptions | None = None) -> Context:
        return replace(self, tenant=tenant, language=language, answer=answer or AnswerOptions(),
                       deadline=time.monotonic() + self.config.research_seconds)

    def display(self, name: str) -> str:
        return self.catalog.display(name)

    def fence(self) -> str | None:
        """The code of this request's passage fences (`Ledger.render`): for a caller who set a `seed` (who asks
        for the same answer to the same request), one derived from the seed and the deployment's secret key, so
        that the same request gets the same prompt; otherwise None (a random code per prompt). A document's
        author knows neither the key nor, so, the code."""
        if self.answer.seed is None:
            return None
        return hmac.new(self.fence_key, str(self.answer.seed).encode(), hashlib.sha256).hexdigest()[:4]

    async def cached(self, kind: str, key: object, compute: Callable[[], Awaitable[tuple[Any, Usage]]]
                     ) -> tuple[Any, Usage]:
        """`compute()` -> (value, usage), memoised in the plan cache under (kind, tenant, visible collections as
        described and as they hold, fingerprint, key): a plan made for a caller who sees more collections is never
        reused for one who sees fewer (it could route to, or word a query for, a collection hidden from them), nor
        once a collection it could route to changed."""
        if self.cache is None:
            return await compute()
        catalog = self.catalog
        name = cache_key(kind, self.tenant, catalog.names, catalog.described, catalog.holdings, self.fingerprint, key)
        hit = await self.cache.get(name)
        if hit is not None:
            return hit, Usage()
        value, usage = await compute()
        if value is not None:
            await self.cache.set(name, value, self.config.cache_ttl_s)
        return value, usage
