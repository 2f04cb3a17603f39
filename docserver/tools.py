"""MCP tools imitating the production "genai-utils" document server.

Tool names, arguments and output format are a contract shared with the
production server: the NEO NL client talks to either with the same code.

* ``list_documents(query)`` -> one Markdown TextContent (titles per collection)
* ``search_collection(query, collection)`` -> one TextContent per chunk plus an
  EmbeddedResource ``neo-nl://sources`` (JSON) whose ``sources[i]`` describes chunk i
  (``metadata.score`` and ``metadata.matched_terms`` are additions of this server)
* ``read_document(doc_id, collection, query=None)`` -> the document text
  (with ``query``: only its most relevant sections, plus the sources resource)
* ``list_collections()`` -> one TextContent of JSON describing every collection (an addition of this server: a
  client uses it when ``tools/list`` shows it): name, display name, focus, counts, a ``version`` that changes
  whenever what the collection holds changes, up to 12 titles and headings, its main language

Also additions of this server: the sources resource says the searched collection's ``collection_version``, and a
source whose document was read from a file the library keeps carries ``metadata.file_id`` (the service serves the
original at ``/v1/files/{file_id}/content``).

Works with mcp 2.x (``MCPServer``) and mcp 1.x (``FastMCP``); the differences
live in ``server._streamable_http_app``. The HTTP app around these tools, and who may call them, is ``server.py``.
"""

import contextlib
import functools
import json
import logging
import re
import weakref
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import numpy as np
from mcp.types import CallToolResult, EmbeddedResource, TextContent, TextResourceContents
from starlette.requests import Request
from starlette.responses import JSONResponse

from .documents import Chunk, Collection, Document, chunk_text
from .live import LIBRARY_ERRORS, LiveIndex
from .searchable import Hit, Searchable

try:  # mcp >= 2
    from mcp.server.mcpserver import MCPServer as SDKServer

    MCP_V2 = True
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import FastMCP as SDKServer  # type: ignore[no-redef]

    MCP_V2 = False

logger = logging.getLogger("docserver")

__all__ = [
    "HEALTH_PATH",
    "MCP_V2",
    "SOURCES_URI",
    "SDKServer",
    "build_server",
    "collection_summary",
    "format_collections",
    "format_document",
    "format_document_list",
]

HEALTH_PATH = "/health"  # liveness (counts, no text): open, so a container healthcheck needs no secret
SOURCES_URI = "neo-nl://sources"
SEARCH_LIMIT = 10
LIST_LIMIT = 5
SUMMARY_ITEMS = 12  # titles and headings per collection in list_collections
READ_SECTIONS = 3

INSTRUCTIONS = (
    "Documenten over Nederlandse nucleaire veiligheid (ANVS, IAEA, wetgeving, security). "
    "Gebruik list_documents om titels te vinden en search_collection om passages te zoeken."
)
READ_INSTRUCTIONS = " Met read_document lees je een document (of alleen de relevante secties)."


# --- output formatting (the contract) ---------------------------------------


def _source(hit: Hit, file_id: str | None = None) -> dict[str, Any]:
    document, chunk = hit.document, hit.chunk
    return {
        "fileName": document.title,
        "fileId": document.doc_id,
        "relevance": hit.relevance,
        "metadata": {
            "url": chunk.url or document.url,
            "title": document.title,
            "year": document.year,
            "collection": document.collection,
            "doc_id": document.doc_id,
            "chunk_index": chunk.chunk_index,
            "section": chunk.section,
            # the page(s) of a paged source (PDF) the passage stands on, 1-based; absent for other documents
            **({"page": chunk.page} if chunk.page is not None else {}),
            **({"page_end": chunk.page_end} if chunk.page_end is not None else {}),
            "kind": document.kind,
            # Raw BM25 score and query-term coverage: lets a client decline what the corpus cannot answer.
            "score": round(hit.score, 4),
            "matched_terms": hit.matched_terms,
            # searched by meaning too: the cosine of the passage's vector to the query's, and its sentences that say
            # what the query asks (``sentences.py``), best first
            **({"similarity": hit.similarity} if hit.similarity is not None else {}),
            **({"matching_sentences": [{"text": text, "similarity": cosine} for text, cosine in hit.sentences]}
               if hit.sentences else {}),
            # the original file the document was read from, kept by the library (served by the service)
            **({"file_id": file_id} if file_id else {}),
        },
        "chunk_content": chunk_text(chunk),
    }


def _sources_resource(hits: Sequence[Hit], index: Searchable, collection: str) -> EmbeddedResource:
    payload = {
        "fileCitations": True,
        "collection_version": index.version(collection),
        "sources": [_source(h, index.file_id(h.document.collection, h.document.doc_id)) for h in hits],
    }
    return EmbeddedResource(
        type="resource",
        resource=TextResourceContents(
            uri=SOURCES_URI, mimeType="application/json", text=json.dumps(payload, ensure_ascii=False)
        ),
    )


def _text(text: str) -> TextContent:
    return TextContent(type="text", text=text)


def _error(message: str) -> CallToolResult:
    return CallToolResult(content=[_text(message)], isError=True)


UNREADABLE = "The document library cannot be read right now; try again later."


def _guarded(tool: Callable[..., Awaitable[CallToolResult]]) -> Callable[..., Awaitable[CallToolResult]]:
    """``tool`` answering a clear error when the library cannot be read (a damaged file, a database gone: the
    details are logged, not shown) instead of failing the call."""

    @functools.wraps(tool)
    async def guarded(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return await tool(*args, **kwargs)
        except LIBRARY_ERRORS as exc:
            logger.warning("the library cannot be read: %s", exc)
            return _error(UNREADABLE)

    return guarded


def _unknown_collection(index: Searchable, name: str) -> CallToolResult:
    known = ", ".join(c.name for c in index.collections)
    return _error(f"Unknown collection '{name}'. Known collections: {known}.")


def format_document_list(index: Searchable, query: str) -> str:
    """Markdown list of matching titles, at most ``LIST_LIMIT`` per collection."""
    list_all = query.strip() in ("", "*")
    blocks: list[str] = []
    for collection in index.collections:
        docs = (index.listing(collection.name, LIST_LIMIT) if list_all
                else index.match_titles(query, collection.name)[:LIST_LIMIT])
        if not docs:
            continue
        lines = [f"## {collection.display_name} ({len(docs)} results)", ""]
        for n, doc in enumerate(docs, start=1):
            lines += [f"{n}. **{doc.title}**", f"   - Doc ID: {doc.doc_id}"]
            if doc.year is not None:
                lines.append(f"   - Year: {doc.year}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) if blocks else f"No documents found for query '{query}'."


_PAGE_LABEL = re.compile(r"(?:,\s*)?\bpp?\.\s*\d+(?:\s*-\s*\d+)?\s*$")  # "2.3 Scope, p. 6", "pp. 6-7"
_PART_LABEL = re.compile(r"\s*\(?\b(?:deel|part)\s+\d+\)?\s*$", re.IGNORECASE)  # "part 2", "Artikel 3 (deel 2)"


def _heading(section: str, title: str) -> str | None:
    """A chunk's section as a heading of its document: without its page label and part number; None when nothing
    else is left or it only repeats the document's title."""
    heading = _PART_LABEL.sub("", _PAGE_LABEL.sub("", section)).strip()
    return heading if heading and heading != title else None


def collection_summary(index: Searchable, collection: Collection) -> dict[str, Any]:
    """What ``list_collections`` says of one collection: its names and focus, counts, version, the first titles
    (by doc_id), its most frequent section headings and the most common language of its documents."""
    outline = index.outline(collection.name, SUMMARY_ITEMS)
    headings: Counter[str] = Counter()
    for (title, section), count in outline.sections.items():
        if heading := _heading(section, title):
            headings[heading] += count
    return {
        "name": collection.name,
        "display_name": collection.display_name,
        "focus": collection.focus,
        "documents": outline.documents,
        "chunks": outline.chunks,
        "version": index.version(collection.name),
        "titles": outline.titles,
        "headings": [heading for heading, _ in headings.most_common(SUMMARY_ITEMS)],
        "language": outline.languages.most_common(1)[0][0] if outline.languages else None,
    }


# per index served: the versions its collections had and the JSON of them
_SUMMARIES: "weakref.WeakKeyDictionary[Searchable, tuple[tuple[str, ...], str]]" = weakref.WeakKeyDictionary()


def format_collections(index: Searchable) -> str:
    """The ``list_collections`` JSON of ``index``, worked out again only when a collection's version changed (a
    reload makes a new index; an index searched on disk sees a save at once)."""
    versions = tuple(index.version(c.name) for c in index.collections)
    cached = _SUMMARIES.get(index)
    if cached is None or cached[0] != versions:
        summaries = [collection_summary(index, c) for c in index.collections]
        cached = _SUMMARIES[index] = (versions, json.dumps({"collections": summaries}, ensure_ascii=False))
    return cached[1]


def format_document(document: Document, chunks: Sequence[Chunk]) -> str:
    """``# Title``, the disclaimer, then ``## Section`` + text for each chunk."""
    parts = [f"# {document.title}"]
    if document.disclaimer:
        parts.append(f"> {document.disclaimer}")
    parts += [f"## {c.section}\n\n{c.text}" for c in chunks]
    return "\n\n".join(parts)


@contextlib.contextmanager
def _keep_root_logging() -> Iterator[None]:
    """The SDK constructors call ``logging.basicConfig``; keep the host's logging as it was."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    try:
        yield
    finally:
        root.setLevel(level)
        root.handlers[:] = handlers


async def _vector(live: LiveIndex, index: Searchable, collection: str, query: str) -> np.ndarray | None:
    """The query's vector when ``collection`` has passage vectors to compare it with (the embedder keeps recent
    queries: a question searched in several collections is embedded once)."""
    return await live.query_vector(query) if index.searches_by_meaning(collection) else None


def build_server(
    index: Searchable | LiveIndex, *, read_document: bool = True, list_collections: bool = True,
    name: str = "neo-nl-docserver",
) -> SDKServer:
    """An MCP server exposing ``index`` through the genai-utils tool contract; ``list_collections=False`` leaves
    out this server's own addition, as the production server has no such tool.

    Every tool call (and ``/health``) answers from ``live.current()``: a ``LiveIndex`` reloads when
    its index file changes; a plain ``Index`` is served as it is.
    """
    live = index if isinstance(index, LiveIndex) else LiveIndex(index)
    with _keep_root_logging():
        server = SDKServer(name, instructions=INSTRUCTIONS + (READ_INSTRUCTIONS if read_document else ""))

    # Tools are async on purpose: sync tools run on worker threads, and the
    # Snowball stemmers are not thread-safe.  Returning ``CallToolResult``
    # (annotated as such) keeps the SDK from deriving an output schema.

    @server.tool(name="list_documents")
    @_guarded
    async def list_documents(query: str) -> CallToolResult:
        """List documents whose title matches the query (keywords), per collection, at most 5 each.
        Use "*" or an empty query to list documents. Returns titles, doc IDs and years only."""
        return CallToolResult(content=[_text(format_document_list(await live.current(), query))])

    @server.tool(name="search_collection")
    @_guarded
    async def search_collection(query: str, collection: str) -> CallToolResult:
        """Search one collection for passages relevant to the query. Returns up to 10 passages
        and a JSON resource (neo-nl://sources) with citation metadata for each passage."""
        index = await live.current()
        if index.collection(collection) is None:
            return _unknown_collection(index, collection)
        hits = index.search(query, collection, limit=SEARCH_LIMIT, query_vector=await _vector(live, index, collection, query),
                            sentence_match=live.sentence_match)
        return CallToolResult(content=[*(_text(chunk_text(h.chunk)) for h in hits),
                                       _sources_resource(hits, index, collection)])

    if list_collections:
        _add_list_collections(server, live)
    if read_document:
        _add_read_document(server, live)

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def health(request: Request) -> JSONResponse:
        index = await live.current()
        try:
            return _health(index)
        except LIBRARY_ERRORS as exc:
            logger.warning("the library cannot be read: %s", exc)
            return JSONResponse({"status": "unavailable", "error": UNREADABLE}, status_code=503)

    return server


def _health(index: Searchable) -> JSONResponse:
    return JSONResponse(
            {
                "status": "ok",
                "documents": index.document_count,
                "chunks": index.chunk_count,
                "collections": [c.name for c in index.collections],
                "versions": {c.name: index.version(c.name) for c in index.collections},
            }
        )


def _add_list_collections(server: SDKServer, live: LiveIndex) -> None:
    @server.tool(name="list_collections")
    @_guarded
    async def list_collections() -> CallToolResult:
        """List every collection with what it holds, as JSON: name, display name, focus, document and chunk
        counts, a version that changes whenever its documents change, up to 12 titles and section headings, and
        the most common language of its documents."""
        return CallToolResult(content=[_text(format_collections(await live.current()))])


def _add_read_document(server: SDKServer, live: LiveIndex) -> None:
    @server.tool(name="read_document")
    @_guarded
    async def read_document(doc_id: str, collection: str, query: str | None = None) -> CallToolResult:
        """Read a document by doc ID. With a query, only the most relevant sections are
        returned (plus a neo-nl://sources resource describing them)."""
        index = await live.current()
        if index.collection(collection) is None:
            return _unknown_collection(index, collection)
        document = index.document(collection, doc_id)
        if document is None:
            return _error(f"Unknown document '{doc_id}' in collection '{collection}'.")
        if not query or not query.strip():
            return CallToolResult(content=[_text(format_document(document, document.chunks))])
        hits = index.search(query, collection, limit=READ_SECTIONS, doc_id=doc_id,
                            query_vector=await _vector(live, index, collection, query), sentence_match=live.sentence_match)
        if not hits and document.chunks:
            hits = [Hit(document, document.chunks[0], 0.0, 0.0)]
        hits.sort(key=lambda h: h.chunk.chunk_index)
        text = format_document(document, [h.chunk for h in hits])
        return CallToolResult(content=[_text(text), _sources_resource(hits, index, collection)])
