"""Document client on the official `mcp` SDK (streamable HTTP), for genai-utils and the reference server.

One long-lived MCP session per process. Each session is owned by a task of its own (the SDK's context
managers must be entered and left in the same task); when a call fails at the connection level the session
is dropped and the next call opens a new one, so a restarted document server is picked up again. Tools are
listed once per session. Works against servers on mcp 1.x (initialize handshake) and 2.x (negotiated by the
SDK's `mode="auto"`). On the per-request protocol of mcp 2.x a tool call is one POST of our own
(`graph/clients/mcp_direct.py`); the SDK negotiates and serves everything else.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any

import aiohttp
import httpx2
from httpx_aiohttp.httpx2 import AiohttpTransport
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT
from mcp.types import CallToolResult, Implementation
from opentelemetry.trace import Span, SpanKind, Tracer

from graph.clients.mcp_direct import DirectCalls, per_request
from graph.clients.mcp_results import (
    DocumentError,
    DocumentRef,
    ToolOutput,
    as_held,
    parse_collections,
    parse_document_list,
    parse_tool_output,
    to_evidence,
)
from graph.clients.tracing import NOOP, safe_span
from graph.clients.transport import IDLE_EXPIRY_S, bearer_headers, failure_name
from graph.collections import Held
from graph.models import Evidence

log = logging.getLogger(__name__)

# The HTTP pool under the MCP session. It keeps as many idle connections as it may open, so parallel searches under
# load do not reconnect each time. The connections are aiohttp's (C HTTP parser, plain asyncio) under the httpx2 API
# the SDK expects: about 1.5 ms less per call than httpcore2 on anyio. Its timeouts are the SDK's own defaults (what
# `create_mcp_http_client` would set, which takes no transport); each call is bounded by the client's `timeout_s`.
HTTP_TIMEOUT = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
HTTP_LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=100, keepalive_expiry=IDLE_EXPIRY_S)
# who we are to the document server, the same on the SDK's requests and the direct calls (`mcp_direct`)
CLIENT_INFO = Implementation(name="neo-nl-agent", version="1")


class _Session:
    """One MCP session, entered and left inside its own task.

    `headers` (the bearer token, if any) are the default headers of both HTTP clients, so the SDK's every request
    (initialize, the GET stream, DELETE) and each direct call carry them without being handed them one by one."""

    def __init__(self, url: str, timeout_s: float, mode: str, headers: dict[str, str]) -> None:
        self.ready: asyncio.Future[tuple[Client, set[str], DirectCalls | None]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._run(url, timeout_s, mode, headers), name="mcp-session")

    async def _run(self, url: str, timeout_s: float, mode: str, headers: dict[str, str]) -> None:
        try:
            async with (
                httpx2.AsyncClient(timeout=HTTP_TIMEOUT, transport=AiohttpTransport(limits=HTTP_LIMITS),
                                   headers=headers) as http,
                Client(streamable_http_client(url, http_client=http), read_timeout_seconds=timeout_s, mode=mode,
                       client_info=CLIENT_INFO) as client,
                aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=HTTP_LIMITS.max_connections,
                                                                     keepalive_timeout=IDLE_EXPIRY_S),
                                      headers=headers) as direct_http,
            ):
                tools = (await client.list_tools()).tools
                direct = None
                if per_request(client.protocol_version):
                    direct = DirectCalls(url, client.protocol_version, tools,
                                         CLIENT_INFO.model_dump(by_alias=True, mode="json", exclude_none=True),
                                         direct_http)
                self.ready.set_result((client, {tool.name for tool in tools}, direct))
                await asyncio.Event().wait()  # held open until close() cancels this task
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for the session
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                log.warning("MCP session ended: %r", exc)

    @property
    def alive(self) -> bool:
        return not self._task.done()

    async def close(self) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
        if self.ready.done() and not self.ready.cancelled():
            self.ready.exception()  # mark a failed handshake as retrieved


FileLink = Callable[[str, int | None], str]  # (file id, page) -> a link that opens the library's original there


def linked(found: list[Evidence], file_link: FileLink | None) -> list[Evidence]:
    """`found`, a passage whose document has no link of its own but an original in the library (`file_id`) linked
    to that original at its page (`file_link`, the service's file endpoint): a source that opens."""
    if file_link is None:
        return found
    return [e.model_copy(update={"url": file_link(e.file_id, e.page)}) if e.file_id and not e.url else e
            for e in found]


class DocumentClient:
    def __init__(
        self, url: str, *, timeout_s: float = 20.0, display_names: dict[str, str] | None = None, mode: str = "auto",
        tracer: Tracer = NOOP, auth_token: str = "", file_link: FileLink | None = None,
    ) -> None:
        self.url = url
        self.file_link = file_link
        # `Authorization: Bearer <auth_token>` on every request (blank: none); private, so no report, repr or span
        # that lists the client's attributes shows it
        self._headers = bearer_headers(auth_token)
        self.tracer = tracer  # a span per tool call (`graph/clients/tracing.py`)
        # "auto" negotiates: the per-request 2026 protocol where the server speaks it (no shared session stream,
        # so parallel calls do not queue behind each other: docs/BENCHMARKS.md, section 6), else the initialize
        # handshake; "legacy" always uses the handshake with a stateful session.
        self.mode = mode
        self.timeout_s = timeout_s
        self._display_to_name = {v.lower(): k for k, v in (display_names or {}).items()}
        self._session: _Session | None = None
        self._lock = asyncio.Lock()
        self.tools: set[str] = set()

    @property
    def authenticated(self) -> bool:
        """Whether calls carry a bearer token (for reports that must say so without showing it)."""
        return bool(self._headers)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _client(self) -> tuple[Client, DirectCalls | None]:
        async with self._lock:
            if self._session is None or not self._session.alive:
                if self._session is not None:
                    await self._session.close()
                self._session = _Session(self.url, self.timeout_s, self.mode, self._headers)
            session = self._session
        try:
            async with asyncio.timeout(self.timeout_s):
                client, self.tools, direct = await asyncio.shield(session.ready)
            return client, direct
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._drop(session)
            raise DocumentError(f"document server unreachable: {failure_name(exc)}") from exc

    async def _drop(self, session: _Session) -> None:
        async with self._lock:
            if self._session is session:
                self._session = None
        await session.close()

    async def _call(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        for attempt in range(2):
            client, direct = await self._client()
            session = self._session
            try:
                async with asyncio.timeout(self.timeout_s):
                    result: CallToolResult | None = None
                    if direct is not None and direct.handles(tool):
                        result = await direct.call(tool, arguments)
                    if result is None:
                        result = await client.call_tool(tool, arguments)
            except TimeoutError as exc:
                raise DocumentError(f"{tool} timed out after {self.timeout_s:.0f}s") from exc
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the session is suspect (server restarted, connection lost)
                log.warning("MCP call %s failed (%r); reconnecting", tool, exc)
                if session is not None:
                    await self._drop(session)
                if attempt == 1:
                    raise DocumentError(f"{tool} failed: {failure_name(exc)}") from exc
                continue
            output = parse_tool_output(result.content)
            if result.is_error:
                raise DocumentError(f"{tool}: {' '.join(output.texts)[:200] or 'error result'}")
            return output
        raise AssertionError("unreachable")

    async def ping(self) -> bool:
        try:
            await self._client()
            return True
        except DocumentError:
            return False

    @property
    def has_read_document(self) -> bool:
        return "read_document" in self.tools

    async def search(self, collection: str, query: str) -> list[Evidence]:
        with self._span("search_collection", collection) as span:
            output = await self._call("search_collection", {"query": query, "collection": collection})
            found = linked(to_evidence(collection, output), self.file_link)
            span.set_attribute("neo.results", len(found))
        return found

    async def list_documents(self, query: str) -> list[DocumentRef]:
        with self._span("list_documents") as span:
            output = await self._call("list_documents", {"query": query})
            found = parse_document_list("\n".join(output.texts), self._display_to_name)
            span.set_attribute("neo.results", len(found))
        return found

    def describe(self, display_names: dict[str, str]) -> None:
        """The display names `list_documents` headers are read by (the catalog's, as it changes)."""
        self._display_to_name = {v.lower(): k for k, v in display_names.items()}

    async def collections(self) -> tuple[list[Held], bool]:
        """The collections the library holds and whether that is all of them: the server's `list_collections`
        where it has one (the reference server: every collection, with its version, titles and headings), else
        the collections `list_documents("*")` names (genai-utils: those with a title matching, five titles each)."""
        await self._client()
        if "list_collections" in self.tools:  # no span: a look the service takes every second, not a request's step
            return parse_collections("\n".join((await self._call("list_collections", {})).texts)), True
        titles: dict[str, list[str]] = {}
        for ref in await self.list_documents("*"):
            titles.setdefault(ref.collection, []).append(ref.title)
        return [held for name, found in titles.items() if (held := as_held(name, found)) is not None], False

    async def read_document(self, collection: str, doc_id: str, query: str | None = None) -> list[Evidence]:
        """Full text (or the sections relevant to `query`) as evidence; falls back to search when absent."""
        await self._client()
        if not self.has_read_document:
            return [e for e in await self.search(collection, query or doc_id) if e.doc_id == doc_id]
        with self._span("read_document", collection) as span:
            output = await self._call("read_document", {"doc_id": doc_id, "collection": collection, "query": query})
            found = linked(to_evidence(collection, output), self.file_link)
            span.set_attribute("neo.results", len(found))
        return found

    def _span(self, tool: str, collection: str = "") -> AbstractContextManager[Span]:
        """A tool call's span (the MCP semantic conventions' names), current while it runs: a direct call sends its
        `traceparent` on (the SDK's session path does not). A failure is recorded by its type only (`safe_span`): a
        server's error text may quote the query."""
        attributes = {"mcp.method.name": "tools/call", "gen_ai.tool.name": tool, "gen_ai.operation.name": "execute_tool"}
        if collection:
            attributes["neo.collection"] = collection
        return safe_span(self.tracer, f"tools/call {tool}", kind=SpanKind.CLIENT, attributes=attributes)


class VisibleDocuments:
    """The document tools as one caller may use them: only the collections it may see (docs/,
    "Collections per caller").

    The document server knows every collection (`list_documents` lists them all, and a result names its own
    collection); this view cuts calls and results down to the caller's, so that no node can search, list or
    read a hidden collection whatever its inputs. Built once per set of visible collections (`Services`)."""

    def __init__(self, client: DocumentClient, names: Iterable[str]) -> None:
        self.client, self.names = client, frozenset(names)

    async def search(self, collection: str, query: str) -> list[Evidence]:
        if not self._allowed(collection):
            return []
        return [e for e in await self.client.search(collection, query) if e.collection in self.names]

    async def list_documents(self, query: str) -> list[DocumentRef]:
        return [r for r in await self.client.list_documents(query) if r.collection in self.names]

    async def read_document(self, collection: str, doc_id: str, query: str | None = None) -> list[Evidence]:
        if not self._allowed(collection):
            return []
        return [e for e in await self.client.read_document(collection, doc_id, query) if e.collection in self.names]

    def _allowed(self, collection: str) -> bool:
        if collection in self.names:
            return True
        # Nodes only search what the caller's catalog routed to: reaching this is a bug, refused without a trace
        # in the answer (an error line would name the collection)
        log.error("a search outside the caller's collections was refused")
        return False


Documents = DocumentClient | VisibleDocuments  # what the pipeline's nodes search through (`Context.docs`)
