"""Process-wide services, created once in the app's lifespan and injected into requests."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from app.access import Access
from app.library import LibraryService, library_index, library_link_key
from app.links import signed_link
from app.settings import Settings
from app.tracing import Tracing
from graph.answer.prompts import Prompts
from graph.build import build_graph
from graph.clients.cache import Cache, cache_key, make_cache
from graph.clients.llm import LLMClient
from graph.clients.mcp_client import DocumentClient, DocumentError, VisibleDocuments
from graph.collections import Catalog, library_catalog, load_catalog
from graph.context import Context

log = logging.getLogger(__name__)


@dataclass
class Services:
    settings: Settings
    graph: Any
    context: Context  # the pipeline's clients and configuration; per request, `Context.for_request`
    cache: Cache  # answers (here) and plans (in the pipeline)
    access: Access  # who may search which collection
    embedded: Any = None  # docserver.embedded.EmbeddedServer when the reference server runs in-process
    # the collections file as written: what the library holds is described by it (`graph/collections.py`)
    configured: Catalog | None = None
    library: LibraryService | None = None  # uploads, when the service can write the library (`app.library`)
    link_key: bytes = b""  # signs the links that open a library file (`app.links`)
    # the context of each set of visible collections seen so far: a few sets at most, one per kind of caller
    views: dict[tuple[str, ...], Context] = field(default_factory=dict)
    _checked: float = -float("inf")  # time.monotonic() of the last look at the library
    _looking: asyncio.Task[None] | None = None
    _unreachable: str = ""  # why the last look failed, logged once

    @classmethod
    async def start(cls, settings: Settings, tracing: Tracing | None = None) -> Services:
        tracing = tracing or Tracing()
        catalog = load_catalog(settings.collections_file)
        embedded, url, token = await document_server(settings)
        llm = llm_client(settings, tracing)
        index = library_index(settings, embedded is not None)
        file_link, key = None, b""  # a passage from a file the service keeps links to it (only it serves the file)
        if index is not None:
            key = await asyncio.to_thread(library_link_key, settings, index)
            file_link = partial(signed_link, public_url(settings), key)
        docs = DocumentClient(
            url,
            file_link=file_link,
            timeout_s=settings.mcp_timeout_s,
            display_names=catalog.display_names(),
            mode=settings.mcp_protocol,
            tracer=tracing.tracer,
            auth_token=token,
        )
        prompts = Prompts(settings.prompts_dir)
        fingerprint = config_fingerprint(settings, prompts)
        cache = make_cache(settings.redis_url, max_items=settings.cache_max_items, ttl_s=settings.cache_ttl_s)
        fence = {"fence_key": settings.fence_key.encode()} if settings.fence_key else {}
        context = Context(llm=llm, docs=docs, catalog=catalog, prompts=prompts, config=settings.pipeline, cache=cache,
                          fingerprint=fingerprint, tracer=tracing.tracer, **fence)
        services = cls(settings, build_graph(), context, cache, Access(settings, ()), embedded, configured=catalog,
                       link_key=key)
        await services.follow_library()
        # an access file that cannot be read stops the service before it answers anything
        services.access = Access(settings, services.catalog.names)
        if index is not None:
            services.library = LibraryService(settings, index, services.access, docs, services.library_changed)
            await services.library.resume()
        return services

    async def library_changed(self) -> None:
        """Look at the library now (a file was just read into it), not at the next interval."""
        self._checked = -float("inf")
        await self.follow_library()

    async def follow_library(self) -> None:
        """Bring the catalog up to what the document library holds (`graph/collections.py`: `library_catalog`),
        asking it at most every LIBRARY_REFRESH_S: a collection created by an ingest or an upload is routed to,
        searched and accepted in `filters` from then on, and one removed is not. Requests arriving while the
        library is being asked wait for the same answer. When it cannot be asked, the catalog stays as it was."""
        task = self._looking
        if task is None or task.done():
            now = time.monotonic()
            if now - self._checked < self.settings.library_refresh_s:
                return
            self._checked = now
            # in a context of its own: the look serves every request waiting on it, so it is none's step (no span,
            # no trace parent, no request id of one of them)
            task = self._looking = asyncio.create_task(self._look(), name="library", context=contextvars.Context())
        await asyncio.shield(task)

    async def _look(self) -> None:
        try:
            held, complete = await self.docs.collections()
        except DocumentError as exc:
            if str(exc) != self._unreachable:
                log.warning("the document library could not say which collections it holds (%s); "
                            "keeping %s", exc, ", ".join(self.catalog.names))
            self._unreachable = str(exc)
            return
        self._unreachable = ""
        catalog = library_catalog(self.configured or self.catalog, held, complete=complete)
        if (catalog.described, catalog.versions) == (self.catalog.described, self.catalog.versions):
            return
        if catalog.names != self.catalog.names:
            log.info("collections in the library: %s", ", ".join(catalog.names))
        self.docs.describe(catalog.display_names())
        self.context = replace(self.context, catalog=catalog)
        self.views = {}

    def context_for(self, visible: tuple[str, ...]) -> Context:
        """The pipeline context of a caller who may search `visible` (not empty): its catalog holds those
        collections only, and its document view searches, lists and reads nothing else. Built once per set."""
        if visible == tuple(self.catalog.names):
            return self.context
        view = self.views.get(visible)
        if view is None:
            catalog = self.catalog.only(visible)
            view = replace(self.context, catalog=catalog, docs=VisibleDocuments(self.docs, catalog.names))
            self.views[visible] = view
        return view

    @property
    def catalog(self) -> Catalog:
        return self.context.catalog

    @property
    def fingerprint(self) -> str:
        """Configuration and prompt version: part of every cache key."""
        return self.context.fingerprint

    @property
    def llm(self) -> LLMClient | None:
        return self.context.llm

    @property
    def docs(self) -> DocumentClient:
        return self.context.docs  # type: ignore[return-value]  # the process-wide context holds the client itself

    async def readiness(self, collections: tuple[str, ...]) -> dict[str, Any]:
        """Status and detail; `collections`: those the asking caller may see (section "Collections per caller"
        under docs/)."""
        llm_ok, docs_ok, cache_ok = await asyncio.gather(
            self.llm.ping() if self.llm else _true(), self.docs.ping(), self.cache.ping()
        )
        return {
            "status": "ready" if llm_ok and docs_ok else "degraded",
            "mode": "offline" if self.llm is None else "llm",
            "documents": "embedded" if self.embedded else "external",
            "llm": {"configured": self.llm is not None, "reachable": llm_ok if self.llm else None,
                    # per model, the form of structured replies the upstream was seen to accept (learnt at first use)
                    "structured_output": dict(self.llm.structured) if self.llm else None},
            "mcp": {"url": self.docs.url, "reachable": docs_ok, "tools": sorted(self.docs.tools),
                    "auth": "bearer" if self.docs.authenticated else "none"},  # whether a token is sent, never which
            "cache": {"backend": "redis" if self.settings.redis_url else "memory", "reachable": cache_ok,
                      "hits": self.cache.hits, "misses": self.cache.misses},
            "collections": list(collections),
            "uploads": self.library is not None,
        }

    async def aclose(self) -> None:
        if self.library:
            await self.library.aclose()
        await self.cache.aclose()
        await self.docs.aclose()
        if self.llm:
            await self.llm.aclose()
        if self.embedded:
            await self.embedded.stop()


def public_url(settings: Settings) -> str:
    """Where users reach the service: PUBLIC_URL, else its own host and port (localhost when it listens on every
    address, which is no address to link to)."""
    if settings.public_url.strip():
        return settings.public_url.strip().rstrip("/")
    host = "localhost" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{f'[{host}]' if ':' in host else host}:{settings.port}"


async def _true() -> bool:
    return True


async def document_server(settings: Settings) -> tuple[Any, str, str]:
    """The document server to ask (embedded server or None, URL, token): MCP_SERVER_URL's, or the reference server
    started in-process when none is configured."""
    embedded, url, token = None, settings.mcp_server_url.strip(), settings.mcp_auth_token
    if not url:
        from docserver.embedded import serve_in_background

        # it answers only requests with its own random token
        embedded = await serve_in_background(embeddings=settings.embeddings)
        url, token = embedded.url, embedded.token
        log.info("embedded reference document server at %s", url)
    return embedded, url, token


def llm_client(settings: Settings, tracing: Tracing) -> LLMClient | None:
    """The upstream model's client; None offline (no LLM_BASE_URL)."""
    if settings.offline:
        return None
    return LLMClient(
        settings.llm_base_url,
        api_key=settings.llm_api_key,
        model=settings.llm_model,
        fast_model=settings.fast_model,
        timeout_s=settings.llm_timeout_s,
        max_concurrency=settings.llm_max_concurrency,
        max_retries=settings.llm_max_retries,
        tracer=tracing.tracer,
        capture_content=tracing.capture_content,
    )


def config_fingerprint(settings: Settings, prompts: Prompts) -> str:
    """The part of every cache key that the configuration makes: the settings that change an answer and the
    prompts' version. The collections themselves are in every cache key (`Catalog.described`, `.holdings`): they
    change while the service runs."""
    relevant = settings.model_dump(
        include={"llm_base_url", "llm_model", "llm_fast_model", "mcp_server_url", "search_top_k", "max_facts",
                 "facts_per_agent", "max_iterations", "claim_check", "min_coverage", "prompt_passages", "passage_chars",
                 "evidence_tokens", "focus_documents", "pair_focus", "answer_max_tokens", "auto_cite", "model_route",
                 "model_summary", "model_decompose", "model_condense"}
    )
    return cache_key("config", relevant, prompts.version)
