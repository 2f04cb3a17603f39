"""The document server over HTTP: its MCP tools (``tools.py``) at ``/mcp`` (streamable HTTP) and ``GET /health``,
behind a bearer token (``RequireToken``) and DNS-rebinding protection (``transport_security``).

Works with mcp 2.x (``MCPServer``) and mcp 1.x (``FastMCP``); the differences live in ``_streamable_http_app``.
"""

import hmac
import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path

from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocketClose

from . import location
from .embeddings import Embedder, EmbeddingSettings
from .index import Index
from .live import LiveIndex
from .tools import HEALTH_PATH, MCP_V2, SDKServer, build_server

__all__ = [
    "KEEPALIVE_S",
    "MCP_PATH",
    "TOKEN_ENV",
    "RequireToken",
    "create_app",
    "token_from_env",
    "transport_security",
]

logger = logging.getLogger("docserver")

MCP_PATH = "/mcp"
TOKEN_ENV = "DOCSERVER_TOKEN"  # the standalone server's bearer token; unset or empty: open
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_HAS_PORT = re.compile(r"(^[^:\[\]]+|\])(:(\d+|\*))$")  # "host:80", "[::1]:*"

# Idle keep-alive of the HTTP server: well above what HTTP clients keep an idle pooled connection (httpx: 5 s). With
# uvicorn's own 5 s, a client could send its next MCP call on a connection the server was closing at that moment; the
# call then fails with a read error, which in the MCP SDK ends the whole client session and every call in flight on it.
KEEPALIVE_S = 75


def transport_security(host: str, allowed_hosts: Sequence[str] | None = None) -> TransportSecuritySettings:
    """DNS-rebinding protection settings.

    ``allowed_hosts`` is a list of Host header values (``docserver:3434``, or
    ``docserver`` for any port); ``["*"]`` disables the check.  Without it the
    check is off when binding a non-loopback address (0.0.0.0 in docker, where
    the server is reached as ``docserver:3434``) and localhost-only otherwise.
    """
    if allowed_hosts is None and host not in LOOPBACK_HOSTS:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if allowed_hosts is not None and "*" in allowed_hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    for entry in (h.strip() for h in allowed_hosts or () if h.strip()):
        hosts += [entry] if _HAS_PORT.search(entry) else [entry, f"{entry}:*"]
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


# What a request without the token gets: a JSON-RPC error (an MCP client reports its message rather than a bare
# status) that says nothing about the server but that it wants a token.
_UNAUTHORIZED = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Unauthorized: bearer token required"}}
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="docserver"'}


class RequireToken:
    """ASGI middleware: every request but ``GET /health`` must carry ``Authorization: Bearer <token>``.

    Without it a local process (another user's job, a compromised plug-in) reaching the port could call
    ``search_collection`` on any collection: the service restricts collections per caller, this server does not.
    The check runs before the MCP layer sees the request, so no session, tool or parse of the body is reached
    without the token; comparison is constant-time (``hmac.compare_digest``).  Lifespan events pass untouched.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        if not token:
            raise ValueError("RequireToken needs a non-empty token")
        self.app = app
        self._token = token.encode()

    def __repr__(self) -> str:  # never the token
        return f"{type(self).__name__}({self.app!r})"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] == HEALTH_PATH or self._carries_token(scope):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await WebSocketClose(code=1008)(scope, receive, send)  # policy violation; this server has no sockets
        else:
            await JSONResponse(_UNAUTHORIZED, status_code=401, headers=_CHALLENGE)(scope, receive, send)

    def _carries_token(self, scope: Scope) -> bool:
        """Whether the request's one ``Authorization`` header is ``Bearer <token>`` (scheme case-insensitive)."""
        values = [value for name, value in scope["headers"] if name == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, credentials = values[0].strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._token)


def token_from_env() -> str:
    """The standalone server's token: ``$DOCSERVER_TOKEN``, blank counting as unset (docker-compose passes
    ``${MCP_AUTH_TOKEN:-}``, an empty string when no token is configured)."""
    return os.environ.get(TOKEN_ENV, "").strip()


def _streamable_http_app(server: SDKServer, security: TransportSecuritySettings) -> Starlette:
    """The one place where mcp 1.x and 2.x differ: where HTTP settings go.

    Stateful sessions (``stateless_http=False``) so a restarted server rejects old session ids.
    """
    if MCP_V2:
        return server.streamable_http_app(
            streamable_http_path=MCP_PATH, stateless_http=False, json_response=False, transport_security=security
        )
    # mcp 1.x FastMCP reads these from its settings; streamable_http_app() takes no arguments.
    server.settings.streamable_http_path = MCP_PATH
    server.settings.stateless_http = False
    server.settings.json_response = False
    server.settings.transport_security = security
    return server.streamable_http_app()


def create_app(
    corpus_dir: Path | str | None = None,
    *,
    read_document: bool = True,
    list_collections: bool = True,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] | None = None,
    index: Index | None = None,
    index_path: Path | str | None = None,
    token: str | None = None,
    embeddings: EmbeddingSettings | None = None,
    database_url: str | None = None,
) -> Starlette:
    """ASGI app: MCP streamable HTTP at ``/mcp`` and ``GET /health``.

    With ``token`` (default: ``$DOCSERVER_TOKEN``, see ``token_from_env``) every request but ``GET /health``
    needs ``Authorization: Bearer <token>`` (``RequireToken``); an empty token leaves the server open, as it
    was before tokens, which is logged as a warning when bound beyond loopback.

    The index is built here from ``corpus_dir`` (default: the bundled corpus) plus the documents
    ingested into ``index_path`` (default: ``$DOCSERVER_INDEX`` or the checkout's ``data/`` folder,
    see ``store.py``), and rebuilt while serving when another process ingests into that file (see
    ``live.py``).  With ``database_url`` (default: ``$DOCSERVER_DATABASE_URL``) the library in that PostgreSQL
    database instead, shared with every server on it (``postgres/``).  Pass ``index`` to serve one already built, as it
    is.  With ``embeddings`` (an OpenAI-compatible
    embeddings endpoint) passages are searched by meaning too (``hybrid.py``; ``live.py`` embeds what waits).
    """
    embedder = Embedder(embeddings) if embeddings is not None else None
    database_url = location.database_url(database_url)
    live = (LiveIndex(index, embedder=embedder) if index is not None
            else LiveIndex.load(corpus_dir, index_path=index_path, embedder=embedder, database_url=database_url))
    logger.info(
        "%d documents, %d chunks in collections %s%s",
        live.index.document_count,
        live.index.chunk_count,
        ", ".join(c.name for c in live.index.collections),
        f"; watching {live.path}" if live.path is not None else
        f"; in {location.shown(database_url)}" if database_url and index is None else "",
    )
    server = build_server(live, read_document=read_document, list_collections=list_collections)
    app = _streamable_http_app(server, transport_security(host, allowed_hosts))
    token = token_from_env() if token is None else token
    if token:
        app.add_middleware(RequireToken, token=token)  # outermost: before the MCP layer sees anything
    elif host not in LOOPBACK_HOSTS:
        logger.warning("no %s set: anyone who reaches %s may search every collection", TOKEN_ENV, host)
    return app
