"""`tools/call` as one HTTP POST, for document servers on MCP's per-request protocol (2026-07-28 and later).

On that protocol a request carries its own protocol version, method and client facts, and the server answers it
alone (no session id, no shared stream), so a tool call needs nothing of the SDK's session but what it negotiated.
The SDK's way through one call (its dispatcher, memory streams, a transport task, httpx2 over aiohttp) costs about
2.8 ms of the client's CPU per search against 0.7 ms for the POST and the JSON (200 searches of the reference server
in a row, the client on a core of its own), and a factual question makes four of them on the request's path
(docs/BENCHMARKS.md, sections 2 and 8b).

The SDK still negotiates, lists the tools and serves everything this path does not: servers on the handshake
protocol (mcp 1.x, genai-utils), tools whose results have a declared schema (the SDK validates them), and a result
this path does not read (a server asking for input): `call` returns None and the caller asks the SDK. The tools
called here only read, so asking again is harmless.
"""

from __future__ import annotations

import codecs
import itertools
import json
from collections.abc import Iterable, Mapping
from typing import Any

import aiohttp
from mcp.shared.inbound import (
    MCP_METHOD_HEADER,
    MCP_NAME_HEADER,
    MCP_PROTOCOL_VERSION_HEADER,
    encode_header_value,
    mcp_param_headers,
    x_mcp_header_map,
)
from mcp.types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    CallToolResult,
    Tool,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from graph.clients.tracing import with_trace_context


class DirectCallError(Exception):
    """The server answered a direct call with an HTTP or JSON-RPC error (treated as the SDK's errors are)."""


def per_request(protocol_version: str) -> bool:
    """Whether a negotiated protocol answers each request on its own (no session to share)."""
    return protocol_version in MODERN_PROTOCOL_VERSIONS


class DirectCalls:
    """Tool calls straight over HTTP on one negotiated per-request protocol version."""

    def __init__(self, url: str, protocol_version: str, tools: Iterable[Tool], client_info: Mapping[str, Any],
                 http: aiohttp.ClientSession) -> None:
        self._url, self._http = url, http
        self._headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                         MCP_PROTOCOL_VERSION_HEADER: protocol_version, MCP_METHOD_HEADER: "tools/call"}
        # what the SDK stamps on every request of the version (a client without sampling, roots or elicitation)
        self._meta = {PROTOCOL_VERSION_META_KEY: protocol_version, CLIENT_INFO_META_KEY: dict(client_info),
                      CLIENT_CAPABILITIES_META_KEY: {}}
        tools = list(tools)
        self._plain = frozenset(tool.name for tool in tools if tool.output_schema is None)
        # arguments a tool asks to see mirrored in `Mcp-Param-*` headers (the server checks them against the body)
        self._header_maps = {tool.name: m for tool in tools if (m := x_mcp_header_map(tool.input_schema))}
        self._ids = itertools.count(1)

    def handles(self, tool: str) -> bool:
        return tool in self._plain

    async def call(self, tool: str, arguments: dict[str, Any]) -> CallToolResult | None:
        """The tool's result; None when the server answered with something only the SDK reads."""
        request_id = f"direct-{next(self._ids)}"
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": {"name": tool, "arguments": arguments, "_meta": self._meta}})
        headers = {**self._headers, MCP_NAME_HEADER: encode_header_value(tool)}
        if tool in self._header_maps:
            headers.update(mcp_param_headers(self._header_maps[tool], arguments))
        with_trace_context(headers)  # the tool call's span (current here) goes on at the document server
        async with self._http.post(self._url, data=body, headers=headers) as response:
            if response.status != 200:
                raise DirectCallError(f"HTTP {response.status}")
            if response.content_type == "application/json":
                message = json.loads(await response.read())
            elif response.content_type == "text/event-stream":
                message = await _reply_in_stream(response.content, request_id)
            else:
                raise DirectCallError(f"unexpected content type {response.content_type!r}")
        return reply_result(message)


def reply_result(message: Any) -> CallToolResult | None:
    """A JSON-RPC reply to `tools/call` as the tool's result: an error raises, a result other than a complete tool
    result (the server asks for input first) is None."""
    if not isinstance(message, dict):
        raise DirectCallError("the reply is not a JSON-RPC message")
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        raise DirectCallError(f"JSON-RPC error {error.get('code')}: {str(error.get('message'))[:200]}")
    result = message.get("result")
    if not isinstance(result, dict) or result.get("resultType", "complete") != "complete":
        return None
    return CallToolResult.model_validate(result)


async def _reply_in_stream(body: aiohttp.StreamReader, request_id: str) -> dict[str, Any]:
    """The reply to `request_id` in a server-sent event stream, read as it arrives (the server's notifications before
    it are skipped; an event may be far longer than a line buffer: a whole document read)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending = ""
    async for chunk in body.iter_any():
        pending = (pending + decoder.decode(chunk)).replace("\r\n", "\n")
        *events, pending = pending.split("\n\n")
        if (reply := _reply_among(events, request_id)) is not None:
            return reply
    # the last event, when the server closed the stream without the blank line after it
    if (reply := _reply_among([pending + decoder.decode(b"", final=True)], request_id)) is not None:
        return reply
    raise DirectCallError("the event stream ended without the reply")


def _reply_among(events: list[str], request_id: str) -> dict[str, Any] | None:
    for event in events:
        message = _event_message(event)
        if isinstance(message, dict) and message.get("id") == request_id and ("result" in message or "error" in message):
            return message
    return None


def _event_message(event: str) -> Any:
    """The JSON of one event's data lines (None for an event without data: a comment, a bare id)."""
    data = [line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")]
    return json.loads("\n".join(data)) if data else None
