"""Tests for the reference MCP document server (docserver/).

Unit tests cover the analyzer, the corpus parser and the BM25 index; the
server tests run the real app on a free loopback port and talk to it with the
official MCP client over streamable HTTP (no mocks).
"""

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from docserver.corpus import BUNDLED_CORPUS, load_collections, load_corpus, parse_document
from docserver.embedded import EmbeddedServer, serve_in_background
from docserver.index import Index
from docserver.server import create_app, transport_security
from docserver.tools import SOURCES_URI
from textkit import analyze, normalize, tokenize

try:  # mcp >= 2
    from mcp import Client
except ImportError:  # mcp 1.x: no high-level Client
    Client = None

# --- fixture corpus ------------------------------------------------------------

COLLECTIONS = [
    {"name": "anvs", "display_name": "ANVS", "focus": "toezicht"},
    {"name": "iaea", "display_name": "IAEA", "focus": "normen"},
    {"name": "wetten_overheid", "display_name": "Wetten", "focus": "wetgeving"},
    {"name": "security", "display_name": "Security", "focus": "beveiliging"},
]

GSR_PART_2 = """\
---
doc_id: iaea-gsr-part-2
title: "IAEA GSR Part 2 — Leadership and Management for Safety (samenvatting)"
year: 2016
url: https://www.iaea.org/publications/11070
language: nl
kind: summary
---

# IAEA GSR Part 2 — Leadership and Management for Safety

> Samenvatting in eigen woorden door NEO NL. Dit is niet de officiële tekst.

## Leiderschap en veiligheidscultuur

De leiding van een organisatie bevordert een sterke veiligheidscultuur en geeft het goede voorbeeld.

## Managementsysteem

Een geïntegreerd managementsysteem borgt dat veiligheid voorop staat bij alle besluiten.

## English summary

The standard sets out each requirement for leadership and management for safety.
"""

SSR_2_1 = """\
---
doc_id: iaea-ssr-2-1
title: "IAEA SSR-2/1 — Safety of Nuclear Power Plants: Design"
year: 2016
url: https://www.iaea.org/publications/10885
kind: summary
---

# IAEA SSR-2/1

> Samenvatting in eigen woorden door NEO NL.

## Ontwerpprincipes

Het ontwerp volgt het principe van verdediging in de diepte. Zie ook deel 2 van de reeks.

## Part 1 of the series

Part 1 describes the general design basis.
"""

ANVS_VERGUNNING = """\
---
doc_id: anvs-vergunningverlening
title: Vergunningverlening voor kerninstallaties
year: 2020
url: https://www.autoriteitnvs.nl/onderwerpen/vergunningverlening
kind: guidance
---

# Vergunningverlening voor kerninstallaties

> Samenvatting in eigen woorden door NEO NL.

## Aanvraag

Een exploitant vraagt een vergunning aan bij de ANVS en levert een veiligheidsrapport.

## Toezicht

De ANVS houdt toezicht op de naleving van de voorschriften.
"""

KERNENERGIEWET = """\
---
doc_id: kernenergiewet
title: 'Kernenergiewet (samenvatting)'
url: https://wetten.overheid.nl/BWBR0002402
kind: law-summary
---

# Kernenergiewet

## Artikel 15a

Artikel 15a regelt dat een vergunning nodig is om een kerncentrale tot 2033 in werking te hebben.
"""


def security_doc(n: int) -> str:
    return f"""\
---
doc_id: security-{n:02d}
title: "Beveiliging van nucleaire installaties deel {n}"
year: {2010 + n}
---

# Beveiliging {n}

## Fysieke beveiliging

Maatregelen voor fysieke beveiliging, nummer {n}.
"""


def write_corpus(root: Path) -> Path:
    files = {
        "iaea/iaea-gsr-part-2.md": GSR_PART_2,
        "iaea/iaea-ssr-2-1.md": SSR_2_1,
        "anvs/anvs-vergunningverlening.md": ANVS_VERGUNNING,
        "wetten_overheid/kernenergiewet.md": KERNENERGIEWET,
        **{f"security/security-{n:02d}.md": security_doc(n) for n in range(1, 8)},
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "collections.json").write_text(json.dumps(COLLECTIONS), encoding="utf-8")
    for name, text in files.items():
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def no_persisted_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Servers here see only the fixture corpus, never documents ingested on this machine."""
    monkeypatch.setenv("DOCSERVER_INDEX", str(tmp_path / "absent.sqlite3"))


@pytest.fixture
def corpus_dir(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus")


@pytest.fixture
def index(corpus_dir: Path) -> Index:
    return Index.from_directory(corpus_dir)


# --- analyzer --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Één Überprüfung", "een uberprufung"),
        ("VEILIGHEID", "veiligheid"),
        ("café", "cafe"),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GSR Part 2", ["gsr", "part", "2"]),
        ("artikel 15a (tot 2033)", ["artikel", "15a", "2033"]),
        ("de vergunning van het bedrijf", ["vergunning", "bedrijf"]),
        ("the requirements of the standard", ["requirements", "standard"]),
        ("SSR-2/1, defence-in-depth", ["ssr", "2", "1", "defence", "depth"]),
    ],
)
def test_tokenize(text: str, expected: list[str]) -> None:
    assert tokenize(text) == expected


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("vergunningen", "vergunning"),
        ("vergunning", "vergunningen"),
        ("requirements", "requirement"),
        ("veiligheidscultuur", "veiligheidscultuur"),
        ("Veiligheidscultuur", "VEILIGHEIDSCULTUUR"),
        ("geïntegreerd", "geintegreerd"),
        ("15a", "15a"),
    ],
)
def test_analyzer_matches(query: str, text: str) -> None:
    (q,), (t,) = analyze(query), analyze(text)
    assert q & t


def test_analyzer_keeps_distinct_words_apart() -> None:
    (a,), (b,) = analyze("vergunning"), analyze("veiligheid")
    assert not a & b


# --- corpus ----------------------------------------------------------------------


def test_parse_document_front_matter_and_chunks() -> None:
    doc = parse_document(GSR_PART_2, collection="iaea", default_id="ignored")
    assert doc.doc_id == "iaea-gsr-part-2"
    assert doc.title == "IAEA GSR Part 2 — Leadership and Management for Safety (samenvatting)"
    assert (doc.year, doc.kind, doc.language) == (2016, "summary", "nl")
    assert doc.url == "https://www.iaea.org/publications/11070"
    assert doc.disclaimer is not None and doc.disclaimer.startswith("Samenvatting in eigen woorden")
    assert [c.section for c in doc.chunks] == ["Leiderschap en veiligheidscultuur", "Managementsysteem", "English summary"]
    assert [c.chunk_index for c in doc.chunks] == [0, 1, 2]
    assert doc.chunks[2].text == "The standard sets out each requirement for leadership and management for safety."
    assert all("Samenvatting" not in c.text and not c.text.startswith("#") for c in doc.chunks)


def test_parse_document_defaults() -> None:
    doc = parse_document(KERNENERGIEWET, collection="wetten_overheid", default_id="x")
    assert doc.title == "Kernenergiewet (samenvatting)"  # single-quoted value
    assert doc.year is None and doc.disclaimer is None
    bare = parse_document("# Kop\n\nAlleen tekst.\n", collection="anvs", default_id="bare")
    assert (bare.doc_id, bare.title, bare.year) == ("bare", "Kop", None)
    assert [(c.section, c.text) for c in bare.chunks] == [("Kop", "Alleen tekst.")]


def test_load_corpus(corpus_dir: Path) -> None:
    docs = load_corpus(corpus_dir)
    assert len(docs) == 11
    assert {d.collection for d in docs} == {c["name"] for c in COLLECTIONS}
    assert [c.name for c in load_collections(corpus_dir)] == [c["name"] for c in COLLECTIONS]


def test_load_corpus_rejects_duplicate_ids(corpus_dir: Path) -> None:
    (corpus_dir / "iaea" / "copy.md").write_text(GSR_PART_2, encoding="utf-8")
    with pytest.raises(ValueError, match="duplicate doc_id"):
        load_corpus(corpus_dir)


def test_bundled_corpus_loads() -> None:
    collections = load_collections(BUNDLED_CORPUS)
    docs = load_corpus(BUNDLED_CORPUS)
    counts = {c.name: sum(d.collection == c.name for d in docs) for c in collections}
    if min(counts.values(), default=0) < 1:
        pytest.skip(f"bundled corpus not filled yet: {counts}")
    assert {c.name for c in collections} == {"anvs", "iaea", "wetten_overheid", "security"}
    assert all(n >= 1 for n in counts.values()), counts
    assert all(d.chunks and d.title for d in docs)
    assert Index(docs, collections).chunk_count >= len(docs)


# --- index -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "collection", "doc_id", "section"),
    [
        ("vergunningen", "anvs", "anvs-vergunningverlening", "Aanvraag"),
        ("requirements", "iaea", "iaea-gsr-part-2", "English summary"),
        ("veiligheidscultuur", "iaea", "iaea-gsr-part-2", "Leiderschap en veiligheidscultuur"),
        ("GSR Part 2", "iaea", "iaea-gsr-part-2", None),
        ("artikel 15a", "wetten_overheid", "kernenergiewet", "Artikel 15a"),
    ],
)
def test_search_top_hit(index: Index, query: str, collection: str, doc_id: str, section: str | None) -> None:
    hits = index.search(query, collection)
    assert hits, query
    assert hits[0].document.doc_id == doc_id
    if section is not None:
        assert hits[0].chunk.section == section
    assert hits[0].relevance == 1.0
    assert all(0 < h.relevance <= 1 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_search_is_per_collection(index: Index) -> None:
    assert index.search("vergunning", "iaea") == []
    assert {h.document.collection for h in index.search("vergunning", "wetten_overheid")} == {"wetten_overheid"}
    with pytest.raises(KeyError):
        index.search("x", "nope")


def test_search_without_terms(index: Index) -> None:
    assert index.search("", "iaea") == []
    assert index.search("de het van", "iaea") == []
    assert index.search("xyzzy", "iaea") == []


def test_search_ties_are_deterministic(corpus_dir: Path) -> None:
    index = Index.from_directory(corpus_dir)
    hits = index.search("fysieke beveiliging", "security")
    assert [h.document.doc_id for h in hits] == [f"security-{n:02d}" for n in range(1, 8)]
    assert len({h.score for h in hits}) == 1
    reversed_docs = list(reversed(load_corpus(corpus_dir)))
    again = Index(reversed_docs, load_collections(corpus_dir)).search("fysieke beveiliging", "security")
    assert [(h.document.doc_id, h.chunk.chunk_index) for h in again] == [
        (h.document.doc_id, h.chunk.chunk_index) for h in hits
    ]


def test_search_limit_and_doc_filter(index: Index) -> None:
    assert len(index.search("beveiliging", "security", limit=3)) == 3
    hits = index.search("safety veiligheid", "iaea", limit=None, doc_id="iaea-ssr-2-1")
    assert hits and {h.document.doc_id for h in hits} == {"iaea-ssr-2-1"}


def test_match_titles(index: Index) -> None:
    assert [d.doc_id for d in index.match_titles("GSR leadership", "iaea")] == ["iaea-gsr-part-2"]
    assert [d.doc_id for d in index.match_titles("kerninstallatie vergunningverlening", "anvs")] == ["anvs-vergunningverlening"]
    # titles only: "veiligheidsrapport" occurs in the text, not in a title
    assert index.match_titles("veiligheidsrapport", "anvs") == []


# --- server over real HTTP ---------------------------------------------------------


@asynccontextmanager
async def running(corpus_dir: Path, **kwargs: Any) -> AsyncIterator[EmbeddedServer]:
    server = await serve_in_background(corpus_dir=corpus_dir, **kwargs)
    try:
        yield server
    finally:
        await server.stop()


def bearer(token: str) -> dict[str, str]:
    """The header an embedded server wants (it refuses requests without its token, `RequireToken`)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


@asynccontextmanager
async def connect(url: str, token: str = "") -> AsyncIterator[Any]:
    if Client is not None:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        async with create_mcp_http_client(headers=bearer(token)) as http, \
                Client(streamable_http_client(url, http_client=http)) as client:
            yield client
        return
    from mcp import ClientSession
    from mcp.client.streamable_http import streamablehttp_client

    async with streamablehttp_client(url, headers=bearer(token)) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool and return the result as it looks on the wire (camelCase keys)."""
    result = await client.call_tool(tool, arguments)
    return result.model_dump(by_alias=True, mode="json")


def split_result(result: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """(texts of the TextContent items, sources of the single neo-nl://sources resource)."""
    texts = [c["text"] for c in result["content"] if c["type"] == "text"]
    resources = [c["resource"] for c in result["content"] if c["type"] == "resource"]
    assert len(resources) == 1
    assert resources[0]["uri"] == SOURCES_URI
    assert resources[0]["mimeType"] == "application/json"
    payload = json.loads(resources[0]["text"])
    assert payload["fileCitations"] is True
    assert result["content"][-1]["type"] == "resource"
    return texts, payload["sources"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("read_document", "expected"),
    [
        (True, {"list_documents", "search_collection", "read_document", "list_collections"}),
        (False, {"list_documents", "search_collection", "list_collections"}),
    ],
)
async def test_list_tools(corpus_dir: Path, read_document: bool, expected: set[str]) -> None:
    async with running(corpus_dir, read_document=read_document) as server, connect(server.url, server.token) as client:
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == expected
    by_name = {t.name: t.model_dump(by_alias=True) for t in tools}
    assert all(t.get("outputSchema") is None for t in by_name.values())
    assert set(by_name["search_collection"]["inputSchema"]["required"]) == {"query", "collection"}
    if read_document:
        assert set(by_name["read_document"]["inputSchema"]["required"]) == {"doc_id", "collection"}


@pytest.mark.asyncio
async def test_search_collection_format(corpus_dir: Path) -> None:
    async with running(corpus_dir) as server, connect(server.url, server.token) as client:
        result = await call(client, "search_collection", {"query": "GSR Part 2 veiligheid", "collection": "iaea"})
    assert not result["isError"]
    texts, sources = split_result(result)
    assert 1 <= len(texts) <= 10
    assert len(texts) == len(sources)
    for text, source in zip(texts, sources, strict=True):
        assert text == source["chunk_content"]
        meta = source["metadata"]
        assert set(source) == {"fileName", "fileId", "relevance", "metadata", "chunk_content"}
        assert set(meta) == {
            "url", "title", "year", "collection", "doc_id", "chunk_index", "section", "kind", "score", "matched_terms"
        }
        assert isinstance(meta["score"], float) and meta["score"] > 0 and round(meta["score"], 4) == meta["score"]
        assert 0.0 < meta["matched_terms"] <= 1.0
        assert source["fileId"] == meta["doc_id"] and source["fileName"] == meta["title"]
        assert meta["collection"] == "iaea"
        assert text.startswith(f"[{meta['title']} — {meta['section']}]\n")
        assert 0.0 <= source["relevance"] <= 1.0
    first = sources[0]
    assert first["fileId"] == "iaea-gsr-part-2" and first["relevance"] == 1.0
    assert first["metadata"]["year"] == 2016 and first["metadata"]["kind"] == "summary"
    assert first["metadata"]["url"] == "https://www.iaea.org/publications/11070"
    assert [s["relevance"] for s in sources] == sorted((s["relevance"] for s in sources), reverse=True)
    assert [s["metadata"]["score"] for s in sources] == sorted((s["metadata"]["score"] for s in sources), reverse=True)
    assert first["metadata"]["matched_terms"] == 1.0  # "GSR", "Part", "2" and "veiligheid" all occur


@pytest.mark.asyncio
async def test_search_collection_no_hits_and_unknown_collection(corpus_dir: Path) -> None:
    async with running(corpus_dir) as server, connect(server.url, server.token) as client:
        empty = await call(client, "search_collection", {"query": "xyzzy", "collection": "anvs"})
        unknown = await call(client, "search_collection", {"query": "vergunning", "collection": "nope"})
    assert not empty["isError"]
    assert split_result(empty) == ([], [])
    assert unknown["isError"] is True
    message = unknown["content"][0]["text"]
    assert "nope" in message and all(c["name"] in message for c in COLLECTIONS)


@pytest.mark.asyncio
async def test_list_documents_format(corpus_dir: Path) -> None:
    async with running(corpus_dir) as server, connect(server.url, server.token) as client:
        gsr = await call(client, "list_documents", {"query": "GSR part"})
        everything = await call(client, "list_documents", {"query": "*"})
        empty_query = await call(client, "list_documents", {"query": ""})
        text_only = await call(client, "list_documents", {"query": "veiligheidsrapport"})
        nothing = await call(client, "list_documents", {"query": "xyzzy"})
    assert len(gsr["content"]) == 1 and not gsr["isError"]
    assert gsr["content"][0]["text"] == (
        "## IAEA (1 results)\n"
        "\n"
        "1. **IAEA GSR Part 2 — Leadership and Management for Safety (samenvatting)**\n"
        "   - Doc ID: iaea-gsr-part-2\n"
        "   - Year: 2016"
    )
    listing = everything["content"][0]["text"]
    assert listing == empty_query["content"][0]["text"]
    headers = [line for line in listing.splitlines() if line.startswith("## ")]
    assert headers == ["## ANVS (1 results)", "## IAEA (2 results)", "## Wetten (1 results)", "## Security (5 results)"]
    assert listing.count("   - Doc ID: security-") == 5  # capped at 5 per collection
    assert "**Kernenergiewet (samenvatting)**\n   - Doc ID: kernenergiewet\n\n## Security" in listing  # no year
    for result in (text_only, nothing):
        lines = result["content"][0]["text"].splitlines()
        assert len(lines) == 1 and lines[0].startswith("No documents found")


@pytest.mark.asyncio
async def test_read_document(corpus_dir: Path) -> None:
    async with running(corpus_dir) as server, connect(server.url, server.token) as client:
        full = await call(client, "read_document", {"doc_id": "iaea-gsr-part-2", "collection": "iaea"})
        focused = await call(
            client,
            "read_document",
            {"doc_id": "iaea-gsr-part-2", "collection": "iaea", "query": "requirements managementsysteem"},
        )
        unrelated = await call(
            client, "read_document", {"doc_id": "iaea-gsr-part-2", "collection": "iaea", "query": "xyzzy"}
        )
        unknown_doc = await call(client, "read_document", {"doc_id": "nope", "collection": "iaea"})
        unknown_collection = await call(client, "read_document", {"doc_id": "nope", "collection": "nope"})

    assert [c["type"] for c in full["content"]] == ["text"]
    text = full["content"][0]["text"]
    assert text.startswith("# IAEA GSR Part 2 — Leadership and Management for Safety (samenvatting)\n\n> Samenvatting")
    for heading in ("## Leiderschap en veiligheidscultuur", "## Managementsysteem", "## English summary"):
        assert heading in text
    assert text.index("## Leiderschap") < text.index("## Managementsysteem") < text.index("## English summary")

    texts, sources = split_result(focused)
    assert len(texts) == 1
    assert "## Managementsysteem" in texts[0] and "## English summary" in texts[0]
    assert "## Leiderschap" not in texts[0]
    assert [s["metadata"]["chunk_index"] for s in sources] == [1, 2]  # document order
    assert max(s["relevance"] for s in sources) == 1.0

    texts, sources = split_result(unrelated)
    assert len(sources) == 1 and "## Leiderschap en veiligheidscultuur" in texts[0]  # at least one section

    assert unknown_doc["isError"] is True and "nope" in unknown_doc["content"][0]["text"]
    assert unknown_collection["isError"] is True and "Known collections" in unknown_collection["content"][0]["text"]


@pytest.mark.asyncio
async def test_health_route(corpus_dir: Path) -> None:
    async with running(corpus_dir) as server, httpx.AsyncClient() as http:
        response = await http.get(f"{server.base_url}/health")
    assert response.status_code == 200
    health = response.json()
    versions = health.pop("versions")  # what each collection holds, as list_collections says it
    assert health == {
        "status": "ok",
        "documents": 11,
        "chunks": 3 + 2 + 2 + 1 + 7,
        "collections": ["anvs", "iaea", "wetten_overheid", "security"],
    }
    assert list(versions) == health["collections"] and all(isinstance(v, str) and v for v in versions.values())


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.mark.asyncio
async def test_restart_invalidates_sessions(corpus_dir: Path) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        async with running(corpus_dir) as first:
            response = await http.post(first.url, json=INITIALIZE, headers={**MCP_HEADERS, **bearer(first.token)})
            assert response.status_code == 200
            session_id = response.headers["mcp-session-id"]
        async with running(corpus_dir) as second:
            ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
            headers = {**MCP_HEADERS, **bearer(second.token), "mcp-session-id": session_id,
                       "mcp-protocol-version": "2025-06-18"}
            response = await http.post(second.url, json=ping, headers=headers)
    assert response.status_code == 404


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("allowed_hosts", "host_header", "status"),
    [
        (None, "evil.example:80", 421),
        (["docserver:3434"], "docserver:3434", 200),
        (["docserver"], "docserver:9999", 200),
        (["docserver:3434"], "other:3434", 421),
        (["*"], "evil.example:80", 200),
    ],
)
async def test_allowed_hosts(corpus_dir: Path, allowed_hosts: list[str] | None, host_header: str, status: int) -> None:
    async with running(corpus_dir, allowed_hosts=allowed_hosts) as server, httpx.AsyncClient(timeout=5) as http:
        headers = {**MCP_HEADERS, **bearer(server.token), "Host": host_header}
        response = await http.post(server.url, json=INITIALIZE, headers=headers)
    assert response.status_code == status


def test_transport_security_defaults() -> None:
    assert not transport_security("0.0.0.0").enable_dns_rebinding_protection
    assert transport_security("127.0.0.1").enable_dns_rebinding_protection
    assert "docserver:*" in transport_security("0.0.0.0", ["docserver"]).allowed_hosts


def test_create_app_uses_bundled_corpus_by_default() -> None:
    assert create_app() is not None


@pytest.mark.asyncio
async def test_embedded_server_leaves_signal_handlers_alone(corpus_dir: Path) -> None:
    import signal

    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    async with running(corpus_dir) as server:
        assert server.running and server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/mcp"
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    assert not server.running
    await server.stop()  # idempotent


def test_an_updated_index_ranks_exactly_as_one_built_anew() -> None:
    """A running server's reload indexes only what changed (`Index(..., previous=...)`); what it serves must be what
    a full build of the same documents serves: every query, every collection, scores and order."""
    from dataclasses import replace

    collections = load_collections(BUNDLED_CORPUS)
    docs = load_corpus(BUNDLED_CORPUS)
    removed, changed = docs[0], docs[1]
    edited = replace(changed, chunks=tuple(replace(c, text=c.text + " Splijtstofelementen en reactorvaten.")
                                           for c in changed.chunks))
    added = parse_document("---\ndoc_id: nieuw\ntitle: Nieuwe notitie\n---\n\n# Nieuwe notitie\n\n## Toezicht\n\n"
                           "De ANVS inspecteert splijtstofelementen en reactorvaten jaarlijks.\n",
                           collection=changed.collection, default_id="nieuw")
    before = Index(docs, collections)
    after = [d for d in docs if d not in (removed, changed)] + [edited, added]
    updated, fresh = Index(after, collections, previous=before), Index(after, collections)
    queries = ["splijtstofelementen reactorvaten", "vergunning kerncentrale", "veiligheidscultuur", "radon",
               "nucleaire beveiliging", "artikel 15a", "ANVS toezicht", "emergency preparedness"]
    for collection in {d.collection for d in docs}:
        for query in queries:
            got = [(h.document.doc_id, h.chunk.chunk_index, h.score, h.matched_terms)
                   for h in updated.search(query, collection, limit=None)]
            want = [(h.document.doc_id, h.chunk.chunk_index, h.score, h.matched_terms)
                    for h in fresh.search(query, collection, limit=None)]
            assert got == want, (collection, query)
    assert updated.search("splijtstofelementen reactorvaten", changed.collection)[0].document.doc_id in {"nieuw",
                                                                                                        edited.doc_id}
    assert updated.document(removed.collection, removed.doc_id) is None
    assert fresh.document(removed.collection, removed.doc_id) is None
