"""The MCP document client against the reference server over streamable HTTP."""

from __future__ import annotations

import asyncio

import pytest

from docserver.server import create_app as create_docserver
from graph.clients.mcp_client import DocumentClient, DocumentError
from tests.fakes.servers import ServerThread


@pytest.mark.asyncio
async def test_search_returns_typed_evidence(docserver_url: str) -> None:
    client = DocumentClient(docserver_url, timeout_s=10)
    try:
        evidence = await client.search("wetten_overheid", "Borssele vergunning 2033")
        assert evidence and evidence[0].id.startswith("wetten_overheid/") and "#" in evidence[0].id
        assert all(e.summary and e.url.startswith("https://") for e in evidence)
        again = await client.search("wetten_overheid", "Borssele vergunning 2033")
        assert [e.id for e in again] == [e.id for e in evidence]
        docs = await client.list_documents("veiligheidscultuur")
        assert docs and all(d.collection in {"anvs", "iaea", "wetten_overheid", "security"} for d in docs)
        full = await client.read_document("iaea", "iaea-gsr-part-2", "veiligheidscultuur")
        assert full and all(e.doc_id == "iaea-gsr-part-2" for e in full)
        with pytest.raises(DocumentError):
            await client.search("no_such_collection", "x")
    finally:
        await client.aclose()


@pytest.mark.asyncio
async def test_reconnects_after_a_server_restart() -> None:
    server = ServerThread(create_docserver()).start()
    port = server.port
    client = DocumentClient(server.base_url + "/mcp", timeout_s=5)
    try:
        assert await client.search("iaea", "INSAG-4 veiligheidscultuur")
        server.stop()
        with pytest.raises(DocumentError):
            await client.search("iaea", "INSAG-4")
        server = ServerThread(create_docserver(), port=port).start()
        assert await client.search("iaea", "INSAG-4 veiligheidscultuur")  # a new session, same client
    finally:
        await client.aclose()
        server.stop()


@pytest.mark.asyncio
async def test_read_document_absent_falls_back_to_search() -> None:
    with ServerThread(create_docserver(read_document=False)) as server:
        client = DocumentClient(server.base_url + "/mcp", timeout_s=5)
        try:
            evidence = await client.read_document("iaea", "iaea-gsr-part-2", "GSR Part 2 veiligheidscultuur")
            assert not client.has_read_document
            assert evidence and all(e.doc_id == "iaea-gsr-part-2" for e in evidence)
        finally:
            await client.aclose()


@pytest.mark.asyncio
async def test_unreachable_server_fails_fast() -> None:
    client = DocumentClient("http://127.0.0.1:9/mcp", timeout_s=2)
    try:
        with pytest.raises(DocumentError):
            await asyncio.wait_for(client.search("iaea", "x"), 5)
        assert not await client.ping()
    finally:
        await client.aclose()
