"""Hostile neighbours of the document server (issue 57): another local process finds its port and asks it directly.

The service restricts collections per caller; the document server does not. So the server answers only requests
carrying a bearer token: the embedded one a random token per server that only the service knows, the standalone one
`$DOCSERVER_TOKEN`, an external one whatever `MCP_AUTH_TOKEN` says. Everything here runs over real HTTP on
127.0.0.1; the attacker uses the official MCP SDK client or plain httpx, as any process on the host could.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.types import ASGIApp, Receive, Scope, Send

from app.main import create_app
from app.services import Services
from app.settings import Settings
from app.tracing import Tracing
from docserver.embedded import serve_in_background
from docserver.server import TOKEN_ENV
from docserver.server import create_app as create_docserver
from graph.clients.mcp_client import DocumentClient
from tests.conftest import QUESTION
from tests.fakes.servers import ServerThread

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "s3cret-token-for-the-tests-0123456789abcdef"
RESTRICTED = {"query": "beveiliging sabotage", "collection": "security"}  # a collection a caller may be denied
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


# --- the attacker's tools ---------------------------------------------------------------------------------------


def _leaf(exc: BaseException) -> BaseException:
    """The first error inside the SDK's task-group wrappers."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def sdk_search(url: str, headers: dict[str, str] | None = None) -> tuple[str | BaseException, list[int]]:
    """`search_collection` on the restricted collection through the official MCP SDK client: the text it got (or
    what it raised) and the HTTP status of every response the server sent."""
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with create_mcp_http_client(headers=headers) as http:
        http.event_hooks = {"request": [], "response": [record]}
        try:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                result = await client.call_tool("search_collection", RESTRICTED)
        except Exception as exc:  # noqa: BLE001 - the refusal is the result under test
            return _leaf(exc), statuses
    return "\n".join(getattr(item, "text", "") for item in result.content), statuses


def assert_refused(outcome: str | BaseException, statuses: list[int]) -> None:
    assert isinstance(outcome, MCPError) and "Unauthorized" in str(outcome), f"answered: {str(outcome)[:100]!r}"
    assert statuses and set(statuses) == {401}


def assert_unauthorized(response: httpx.Response) -> None:
    """Refused before the MCP layer: 401, a bearer challenge, a small JSON error, no session."""
    assert response.status_code == 401, (response.request.method, str(response.request.url), response.status_code)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert response.json()["error"]["message"].startswith("Unauthorized")
    assert "mcp-session-id" not in response.headers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Recorder:
    """In front of a document server: what each request carried in its `Authorization` header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[tuple[str, str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            self.seen.append((scope["method"], scope["path"], auth))
        await self.app(scope, receive, send)


@contextmanager
def running_service(**overrides: Any) -> Iterator[tuple[str, Any]]:
    """The service on a loopback port (its lifespan starts the embedded server when no MCP URL is set)."""
    values: dict[str, Any] = {"llm_base_url": "", "response_cache": False, "sse_ping_s": 1.0, **overrides}
    app = create_app(Settings(_env_file=None, **values))
    with ServerThread(app) as server:
        yield server.base_url, app


@asynccontextmanager
async def embedded() -> AsyncIterator[Any]:
    server = await serve_in_background(index_path=Path(os.environ["DOCSERVER_INDEX"]).with_name("none.sqlite3"))
    try:
        yield server
    finally:
        await server.stop()


# --- (1) the MCP SDK with no credentials, against the service's own embedded server --------------------------------


async def test_a_local_process_with_the_mcp_sdk_cannot_search_the_embedded_server() -> None:
    """The port is in /health/ready; at HEAD the SDK's search there returned the security collection's text."""
    with running_service(mcp_server_url="") as (base, _):
        ready = httpx.get(base + "/health/ready", timeout=30).json()
        assert ready["documents"] == "embedded" and ready["mcp"]["reachable"] is True
        outcome, statuses = await sdk_search(ready["mcp"]["url"])
    assert_refused(outcome, statuses)


# --- (2) plain HTTP with a wrong or misplaced credential -----------------------------------------------------------


async def test_plain_http_with_a_wrong_bearer_gets_401_before_the_mcp_layer() -> None:
    """At HEAD each of these reached the MCP layer (200 and a session for initialize, a stream for GET)."""
    async with embedded() as server, httpx.AsyncClient(timeout=10) as http:
        strangers = [  # what a process that does not know the token can send
            await http.post(server.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": "Bearer wrong"}),
            await http.post(server.url, json=INITIALIZE, headers=MCP_HEADERS),
            await http.get(server.url, headers={"Accept": "text/event-stream", "Authorization": "Bearer wrong"}),
            await http.delete(server.url, headers={"Authorization": "Bearer wrong"}),
        ]
        health = await http.get(server.base_url + "/health")
        for response in strangers:
            assert_unauthorized(response)
        token = server.token
        misplaced = [  # the right token, but not as `Authorization: Bearer <token>` alone
            await http.post(server.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Basic {token}"}),
            await http.post(server.url + f"?token={token}", json=INITIALIZE, headers=MCP_HEADERS),
            await http.post(server.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token[:-1]}"}),
            await http.post(server.url, json=INITIALIZE, headers=httpx.Headers(
                [*MCP_HEADERS.items(), ("Authorization", "Bearer wrong"), ("Authorization", f"Bearer {token}")])),
        ]
        accepted = await http.post(server.url, json=INITIALIZE,
                                   headers={**MCP_HEADERS, "Authorization": f"bearer {token}"})
    for response in misplaced:
        assert_unauthorized(response)
    assert health.status_code == 200 and health.json()["status"] == "ok"  # liveness stays open (no text in it)
    assert accepted.status_code == 200 and "mcp-session-id" in accepted.headers
    assert token not in repr(server)


# --- (3) the service itself still answers, with the token the embedded server now demands -------------------------


async def test_the_service_answers_through_its_embedded_server_that_refuses_everyone_else() -> None:
    with running_service(mcp_server_url="") as (base, app):
        search = httpx.post(base + "/v1/search", json={"query": QUESTION}, timeout=60)
        answer = httpx.post(base + "/v1/chat/completions", timeout=60, json={
            "model": "neo-nl-agent", "stream": False, "messages": [{"role": "user", "content": QUESTION}]})
        ready = httpx.get(base + "/health/ready", timeout=30)
        stranger = httpx.post(ready.json()["mcp"]["url"], json=INITIALIZE, headers=MCP_HEADERS, timeout=10)
        services = app.state.services
    assert stranger.status_code == 401  # 200 at HEAD: the door was open
    assert search.status_code == 200 and search.json()["data"]
    assert "31 december 2033" in answer.json()["choices"][0]["message"]["content"]
    assert ready.status_code == 200 and ready.json()["mcp"]["auth"] == "bearer"
    assert services.embedded.token not in ready.text


# --- (4) the standalone server: $DOCSERVER_TOKEN -------------------------------------------------------------------


async def test_the_standalone_server_requires_docserver_token_and_keeps_health_open(tmp_path: Path) -> None:
    """`python -m docserver` as docker-compose runs it; at HEAD it ignored $DOCSERVER_TOKEN and answered anyone."""
    port = free_port()
    env = {**os.environ, TOKEN_ENV: TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "docserver", "--port", str(port), "--index", str(tmp_path / "none.sqlite3"),
         "--log-level", "warning"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        health = _wait_for_health(base, process)
        refused = await sdk_search(base + "/mcp")
        found, statuses = await sdk_search(base + "/mcp", {"Authorization": f"Bearer {TOKEN}"})
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=15)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert_refused(*refused)
    assert isinstance(found, str) and "beveiliging" in found.lower() and 401 not in statuses
    assert TOKEN not in stderr.decode(errors="replace")


def _wait_for_health(base: str, process: subprocess.Popen[bytes]) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:
        try:
            return httpx.get(base + "/health", timeout=2)  # no credentials: docker's healthcheck sends none
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_an_open_standalone_server_beyond_loopback_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="docserver")
    create_docserver(host="0.0.0.0", token="")
    create_docserver(host="127.0.0.1", token="")
    create_docserver(host="0.0.0.0", token=TOKEN)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and TOKEN_ENV in warnings[0] and "0.0.0.0" in warnings[0]


# --- (5) an external server with MCP_AUTH_TOKEN --------------------------------------------------------------------


def test_the_agent_sends_mcp_auth_token_to_an_external_server_and_never_shows_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At HEAD the service sent no Authorization header (and the server, ignoring $DOCSERVER_TOKEN, let it in)."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # the server built as `python -m docserver` builds it
    recorder = Recorder(create_docserver())
    with ServerThread(recorder) as docs:
        url = docs.base_url + "/mcp"
        with running_service(mcp_server_url=url, mcp_auth_token=TOKEN) as (base, _):
            ready = httpx.get(base + "/health/ready", timeout=30)
            search = httpx.post(base + "/v1/search", json={"query": QUESTION}, timeout=60)
        with running_service(mcp_server_url=url) as (base, _):  # the same server, no token configured
            without = httpx.get(base + "/health/ready", timeout=30)
    sent = [auth for method, path, auth in recorder.seen if path == "/mcp"]
    assert sent.count(f"Bearer {TOKEN}") >= 3  # negotiation, tools/list, the direct tool calls
    assert set(sent) == {f"Bearer {TOKEN}", ""}  # the second service's attempts: nothing else was ever sent
    assert ready.status_code == 200 and ready.json()["mcp"]["reachable"] is True
    assert ready.json()["mcp"]["auth"] == "bearer" and TOKEN not in ready.text
    assert search.status_code == 200 and search.json()["data"]
    assert without.status_code == 503 and without.json()["mcp"]["reachable"] is False


async def test_every_request_of_a_session_carries_the_token_including_the_get_stream() -> None:
    """The SDK's handshake session (`mode="legacy"`): initialize, the GET stream, each POST."""
    recorder = Recorder(create_docserver(token=TOKEN))
    with ServerThread(recorder) as docs:
        client = DocumentClient(docs.base_url + "/mcp", timeout_s=10, mode="legacy", auth_token=TOKEN)
        try:
            assert await client.search("security", "beveiliging sabotage")
            deadline = time.monotonic() + 5
            while "GET" not in {method for method, _, _ in recorder.seen} and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        finally:
            await client.aclose()
    methods = {method for method, _, _ in recorder.seen}
    assert {"POST", "GET"} <= methods
    assert {auth for _, _, auth in recorder.seen} == {f"Bearer {TOKEN}"}


@pytest.mark.parametrize("where", ["embedded", "external"])
async def test_the_token_is_in_no_log_report_repr_or_span(where: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with ServerThread(create_docserver(token=TOKEN)) as docs:
        url = "" if where == "embedded" else docs.base_url + "/mcp"
        settings = Settings(_env_file=None, llm_base_url="", mcp_server_url=url, mcp_auth_token=TOKEN)
        services = await Services.start(settings, Tracing(provider.get_tracer("t"), provider))
        try:
            token = services.embedded.token if where == "embedded" else TOKEN
            assert await services.docs.search("security", "beveiliging sabotage")
            report = json.dumps(await services.readiness(tuple(services.catalog.names)))
            reprs = " ".join(repr(x) for x in (services, services.docs, services.embedded, services.settings))
        finally:
            await services.aclose()
    spans = exporter.get_finished_spans()
    assert spans and json.loads(report)["mcp"]["reachable"] is True
    assert token not in report and token not in reprs
    assert all(token not in str(value) for span in spans for value in span.attributes.values())
    assert all(token not in str(record.__dict__) for record in caplog.records)
