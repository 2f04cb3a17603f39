"""The run's context: clients and configuration, built once per process; per request only its own facts.

LangGraph injects it into nodes as `runtime.context`. State holds data only; nothing here is state.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from graph.cache import Cache, cache_key
from graph.collections import Catalog
from graph.config import PipelineConfig
from graph.llm import LLMClient
from graph.mcp_client import DocumentClient
from graph.models import Language, Usage
from graph.prompts import Prompts


@dataclass(frozen=True, slots=True)
class Context:
    llm: LLMClient | None  # None = offline (extractive) mode
    docs: DocumentClient
    catalog: Catalog
    prompts: Prompts
    config: PipelineConfig = PipelineConfig()
    cache: Cache | None = None  # plan cache
    fingerprint: str = ""  # configuration and prompt version: a change invalidates cached plans
    # per request
    tenant: str = "anonymous"  # hashed API key: cached plans are never shared across keys
    language: Language = "nl"  # the language of the question, and so of every line and the answer
    deadline: float = math.inf  # time.monotonic() after which no further research round starts

    def for_request(self, *, language: Language, tenant: str = "anonymous") -> Context:
        return replace(self, tenant=tenant, language=language,
                       deadline=time.monotonic() + self.config.research_seconds)

    def display(self, name: str) -> str:
        return self.catalog.display(name)

    async def cached(self, kind: str, key: object, compute: Callable[[], Awaitable[tuple[Any, Usage]]]
                     ) -> tuple[Any, Usage]:
        """`compute()` -> (value, usage), memoised in the plan cache under (kind, tenant, fingerprint, key)."""
        if self.cache is None:
            return await compute()
        name = cache_key(kind, self.tenant, self.fingerprint, key)
        hit = await self.cache.get(name)
        if hit is not None:
            return hit, Usage()
        value, usage = await compute()
        if value is not None:
            await self.cache.set(name, value, self.config.cache_ttl_s)
        return value, usage
