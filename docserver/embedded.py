"""Run the document server inside another asyncio application.

Used by the main service when no external MCP server is configured::

    docserver = await serve_in_background()
    ...  # connect an MCP client to docserver.url, sending `Authorization: Bearer {docserver.token}`
    await docserver.stop()

It answers only requests that carry its token (``GET /health`` aside): a random one per server, made here and
known to whoever started it, so another local process that finds the port (it is shown in ``/health/ready``)
cannot read collections the service would not show it.

Its log lines say they are its own: whatever it logs (uvicorn's startup and shutdown lines, the index it
loaded, MCP warnings) is named ``docserver.embedded`` and written by the host's root handlers in the host's
format, not by the ``INFO:     ...`` handler uvicorn gives the host's own server.
"""

import asyncio
import contextlib
import contextvars
import logging
import secrets
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from .embeddings import EmbeddingSettings
from .server import KEEPALIVE_S, MCP_PATH, RequireToken, create_app

__all__ = ["LOGGER", "EmbeddedServer", "serve_in_background"]

LOGGER = "docserver.embedded"
# set in the context an embedded server runs in; every task and callback it starts inherits it, so its records
# are told apart from the host's (the host's MCP client included) by the context they are made in
_in_server: contextvars.ContextVar[bool] = contextvars.ContextVar("docserver_embedded", default=False)
# uvicorn's loggers: a host run by uvicorn gives them a handler of their own (`INFO:     ...`, no logger name)
_UVICORN_LOGGERS = ("uvicorn.error", "uvicorn.access", "uvicorn.asgi")
_installed = False


class _ToOwnLogger(logging.Filter):
    """On uvicorn's loggers: a record made inside an embedded server goes to ``LOGGER``'s handlers (the host's
    root handlers, the host's format) instead of uvicorn's. Its requests (uvicorn logs them whenever the host
    has an access log) only at DEBUG: the host's MCP client makes several per question."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != LOGGER:  # the host's own record
            return True
        if getattr(record, "origin", "") == "uvicorn.access":
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
        own = logging.getLogger(LOGGER)
        if own.isEnabledFor(record.levelno):
            own.handle(record)
        return False


_TO_OWN_LOGGER = _ToOwnLogger()


def _install() -> None:
    """Once per process: records made inside an embedded server are named ``LOGGER``, whatever logger made
    them (uvicorn, MCP, the index), and uvicorn's are handed to ``LOGGER``."""
    global _installed
    if _installed:
        return
    make_record = logging.getLogRecordFactory()

    def own_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        if _in_server.get():
            record.origin = record.name  # e.g. uvicorn.error, for a custom format
            record.name = LOGGER
        return record

    logging.setLogRecordFactory(own_record)
    for name in _UVICORN_LOGGERS:
        logging.getLogger(name).addFilter(_TO_OWN_LOGGER)
    _installed = True


def _server_context() -> contextvars.Context:
    """The context a new embedded server is built and run in."""
    _install()
    context = contextvars.copy_context()
    context.run(_in_server.set, True)
    return context


@contextlib.contextmanager
def _keep_access_log() -> Iterator[None]:
    """``uvicorn.Config(access_log=False)`` empties the process-wide ``uvicorn.access`` logger, which would
    silence the host's own access log (this server's requests are demoted by ``_OwnLogs`` instead)."""
    access = logging.getLogger("uvicorn.access")
    handlers, propagate = list(access.handlers), access.propagate
    try:
        yield
    finally:
        access.handlers, access.propagate = handlers, propagate


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the host application's signal handlers alone."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # uvicorn >= 0.29
        yield

    def install_signal_handlers(self) -> None:  # older uvicorn
        return None


def _new_token() -> str:
    """A bearer token for one embedded server: 256 random bits, never stored, logged or shown."""
    return secrets.token_urlsafe(32)


class EmbeddedServer:
    """A running background server; ``url`` is its MCP endpoint, ``token`` the bearer token it requires."""

    def __init__(self, server: uvicorn.Server, task: "asyncio.Task[None]", host: str, port: int, token: str) -> None:
        self._server = server
        self._task = task
        self.host = host
        self.port = port
        self.token = token
        url_host = f"[{host}]" if ":" in host else host
        self.base_url = f"http://{url_host}:{port}"
        self.url = f"{self.base_url}{MCP_PATH}"

    def __repr__(self) -> str:  # never the token
        return f"EmbeddedServer(url={self.url!r})"

    @property
    def running(self) -> bool:
        return not self._task.done()

    async def stop(self, timeout: float = 5.0) -> None:
        """Shut down gracefully; force after ``timeout`` seconds. Safe to call twice."""
        self._server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(self._task), timeout)
        except TimeoutError:
            self._server.force_exit = True
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def __aenter__(self) -> "EmbeddedServer":
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def serve_in_background(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    corpus_dir: Path | str | None = None,
    read_document: bool = True,
    allowed_hosts: Sequence[str] | None = None,
    app: ASGIApp | None = None,
    startup_timeout: float = 30.0,
    index_path: Path | str | None = None,
    embeddings: EmbeddingSettings | None = None,
) -> EmbeddedServer:
    """Start the server as a task in the running event loop and wait until it accepts connections.

    The socket is bound here, so ``port=0`` picks a free port that is known
    before uvicorn starts.  uvicorn installs no signal handlers and no logging
    configuration; the server's log records go to ``LOGGER``.  ``app`` replaces the default ``create_app(...)``, which
    serves ``corpus_dir`` plus the persisted index at ``index_path`` (see ``store.py``), searched by meaning too
    with ``embeddings``.  Either way every request
    but ``GET /health`` needs the returned server's ``token`` (``$DOCSERVER_TOKEN`` plays no part here).
    """
    context = _server_context()
    token = _new_token()
    if app is None:  # built in the server's context: the index it loads is logged as the server's
        app = context.run(
            create_app,
            corpus_dir,
            read_document=read_document,
            host=host,
            allowed_hosts=allowed_hosts,
            index_path=index_path,
            token=token,
            embeddings=embeddings,
        )
    else:
        app = RequireToken(app, token)
    sock = _bound_socket(host, port)
    bound_port = sock.getsockname()[1]
    with _keep_access_log():
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,
            timeout_keep_alive=KEEPALIVE_S,
        )
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name=f"docserver:{bound_port}", context=context)
    await _started(server, task, sock, startup_timeout)
    return EmbeddedServer(server, task, host, bound_port, token)


def _bound_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host`` and ``port`` (0: a free port), not yet listening."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


async def _started(server: _QuietServer, task: asyncio.Task[None], sock: socket.socket, timeout: float) -> None:
    """Wait until ``server`` (running as ``task`` on ``sock``) accepts connections; ``RuntimeError`` when it failed
    to start, ``TimeoutError`` (the server stopped) when it did not within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not server.started:
        if task.done():
            sock.close()
            exc = task.exception()
            raise RuntimeError("docserver failed to start") from exc
        if loop.time() > deadline:
            server.should_exit = True
            task.cancel()
            sock.close()
            raise TimeoutError(f"docserver did not start within {timeout} s")
        await asyncio.sleep(0.01)
