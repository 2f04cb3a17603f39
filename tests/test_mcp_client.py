"""The MCP document client against the reference server over streamable HTTP."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from mcp.types import Tool
from pydantic import ValidationError

from docserver.server import create_app as create_docserver
from graph.clients.mcp_client import DocumentClient, DocumentError
from graph.clients.mcp_direct import DirectCallError, DirectCalls, reply_result
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


@pytest.mark.asyncio
async def test_direct_calls_give_what_the_sdk_gives(docserver_url: str) -> None:
    """On the per-request protocol a tool call is one POST of our own (`graph/clients/mcp_direct.py`); over the
    SDK's handshake session the same calls give the same evidence."""
    direct = DocumentClient(docserver_url, timeout_s=10)
    sdk = DocumentClient(docserver_url, timeout_s=10, mode="legacy")
    try:
        assert (await direct._client())[1] is not None and (await sdk._client())[1] is None
        for collection, query in [("wetten_overheid", "Borssele vergunning 2033"), ("iaea", "safety culture")]:
            assert await direct.search(collection, query) == await sdk.search(collection, query)
        assert await direct.list_documents("veiligheidscultuur") == await sdk.list_documents("veiligheidscultuur")
        assert (await direct.read_document("iaea", "iaea-gsr-part-2", "leiderschap")
                == await sdk.read_document("iaea", "iaea-gsr-part-2", "leiderschap"))
        for client in (direct, sdk):  # an error result is an error either way
            with pytest.raises(DocumentError):
                await client.search("no_such_collection", "x")
    finally:
        await direct.aclose()
        await sdk.aclose()


def _scripted_mcp(seen: list[tuple[dict[str, str], dict]], replies: list[dict], status: int = 200):
    """A server answering every POST with `replies` as server-sent events (the last one gets the request's id)."""
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Route

    async def mcp(request):
        body = await request.json()
        seen.append((dict(request.headers), body))
        messages = replies[:-1] + [{**replies[-1], "id": body["id"]}] if replies else []
        # CRLF line ends, and no blank line after the last event (the stream's end closes it)
        text = "\r\n\r\n".join(f"event: message\r\ndata: {json.dumps(m)}" for m in messages)
        return Response(text, status_code=status, media_type="text/event-stream")

    return Starlette(routes=[Route("/mcp", mcp, methods=["POST"])])


TOOL = Tool(name="search_collection", input_schema={
    "type": "object", "properties": {"query": {"type": "string"},
                                     "collection": {"type": "string", "x-mcp-header": "Collection"}}})
LONG = "passage " * 40_000  # one event far longer than a line buffer (a whole document read)
DONE = {"jsonrpc": "2.0", "result": {"content": [{"type": "text", "text": LONG}], "isError": False}}


@pytest.mark.asyncio
async def test_direct_call_reads_its_reply_from_an_event_stream() -> None:
    seen: list[tuple[dict[str, str], dict]] = []
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    other = {"jsonrpc": "2.0", "id": "someone-else", "result": {"content": []}}
    with ServerThread(_scripted_mcp(seen, [progress, other, DONE])) as server:
        async with aiohttp.ClientSession() as http:
            calls = DirectCalls(server.base_url + "/mcp", "2026-07-28", [TOOL], {"name": "t", "version": "1"}, http)
            result = await calls.call("search_collection", {"query": "x", "collection": "iaea"})
    assert result is not None and result.content[0].text == LONG
    headers, body = seen[0]
    assert (headers["mcp-method"], headers["mcp-name"], headers["mcp-protocol-version"]) == (
        "tools/call", "search_collection", "2026-07-28")
    assert headers["mcp-param-collection"] == "iaea"  # the tool asked for its argument as a header
    assert body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"


@pytest.mark.asyncio
@pytest.mark.parametrize("replies, status", [([DONE], 500), ([], 200)])
async def test_direct_call_fails_on_an_http_error_or_a_stream_without_its_reply(replies, status) -> None:
    with ServerThread(_scripted_mcp([], replies, status)) as server:
        async with aiohttp.ClientSession() as http:
            calls = DirectCalls(server.base_url + "/mcp", "2026-07-28", [TOOL], {"name": "t", "version": "1"}, http)
            with pytest.raises(DirectCallError):
                await calls.call("search_collection", {"query": "x"})


@pytest.mark.parametrize("message, expected", [
    ({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a"}]}}, "a"),
    ({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": True, "resultType": "complete"}}, ""),
    ({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required", "inputRequests": {}}}, None),  # the SDK's
    ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "unknown tool"}}, DirectCallError),
    ({"jsonrpc": "2.0", "id": 1, "result": {"content": "not a list"}}, ValidationError),
    (["not", "a", "message"], DirectCallError),
])
def test_reply_result(message, expected) -> None:
    if isinstance(expected, type):
        with pytest.raises(expected):
            reply_result(message)
        return
    result = reply_result(message)
    if expected is None:
        assert result is None
    else:
        assert result is not None and "".join(c.text for c in result.content) == expected
