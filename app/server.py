"""The HTTP server's own guards, below the ASGI app, where a client that sends nothing is still visible: a deadline
for receiving each request and a bound on open connections (section "Threat model" under docs/: hostile clients).

uvicorn has no timeout for reading a request: a client that sends its headers one byte at a time, stalls its body,
or connects and says nothing holds a connection (a file descriptor, a parser, buffers) for as long as it likes,
and enough of them starve the server. `ConnectionGuard`, uvicorn's `http` option (`server_options`), runs
uvicorn's own protocol with two additions:

* a request (headers, then the whole body) must arrive within REQUEST_HEADER_TIMEOUT_S of the connection being
  opened or of its first byte; else the connection is closed. The deadline stops when the request is in: its
  answer (a streamed answer can take minutes) is never cut by it, and an idle keep-alive connection is closed
  by uvicorn's idle timeout (HTTP_IDLE_TIMEOUT_S), as before;
* a connection opened while MAX_CONNECTIONS are open gets an OpenAI-shaped 503 for its request, and is closed.
  Connections that are already open keep being served (uvicorn's `limit_concurrency` would refuse their next
  request too, and counts the refused connection against the limit it enforces).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, Literal

import h11
from starlette.types import Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.errors import error_response

log = logging.getLogger(__name__)
Parser = Literal["httptools", "h11"]


async def too_many_connections(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to every request on a connection beyond MAX_CONNECTIONS; `Connection: close` ends it."""
    response = error_response(503, "the server has too many open connections; retry shortly",
                              headers={"connection": "close", "retry-after": "1"})
    await response(scope, receive, send)


class RequestDeadline:
    """The guards, mixed into one of uvicorn's protocol classes. The parser-specific subclasses say when a request
    begins (`_arm`) and when it is all in (`_received`)."""

    # the protocol class's own state, set by its __init__ (which this one runs first) and connection_made
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    cycle: Any
    app: Any
    client: tuple[str, int] | None

    def __init__(self, *args: Any, guard: ConnectionGuard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        if len(self.connections) > self.guard.max_connections:  # this one included
            log.warning("a connection beyond MAX_CONNECTIONS (%d) is refused", self.guard.max_connections)
            self.app = too_many_connections
        self._arm()  # a connection that never says anything is closed too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        """A request has begun (or the connection opened): it must be all in by the deadline. A deadline already
        running is kept: the bytes of a request do not buy it more time."""
        if self._deadline is None:
            self._deadline = self.loop.call_later(self.guard.request_timeout_s, self._expire)

    def _received(self) -> None:
        """The whole request is in: from here its answer takes as long as it takes. Not when the answer went out
        before the request was all in (a 404 or 413 that did not read the body): uvicorn then arms no idle timeout
        for the connection any more, and the deadline is what closes it."""
        if self.cycle is None or not self.cycle.response_complete:
            self._disarm()

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        log.info("closed a connection from %s whose request did not arrive within %g s",
                 self.client[0] if self.client else "?", self.guard.request_timeout_s)
        if self.transport.get_write_buffer_size():  # a client that reads nothing is owed no graceful close
            self.transport.abort()
        else:
            self.transport.close()


class GuardedH11Protocol(RequestDeadline, H11Protocol):
    """h11 has no parser callbacks: its state after each batch of events says where the request stands."""

    def handle_events(self) -> None:
        super().handle_events()
        state = self.conn.their_state
        if state is h11.DONE:
            self._received()
        elif state is h11.SEND_BODY or (state is h11.IDLE and self.conn.trailing_data[0]):
            self._arm()  # a body to come, or the first bytes of the next request's head


class GuardedHttpToolsProtocol(RequestDeadline, HttpToolsProtocol):
    """httptools calls back at the first byte of each request and once its body is complete."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._received()


@dataclass(frozen=True)
class ConnectionGuard:
    """uvicorn's `http` option: called like a protocol class, it makes the guarded protocol of `parser` (httptools,
    uvicorn's own choice when installed, and a dependency here; h11 is its pure-Python one). A frozen dataclass, not
    a closure: uvicorn pickles its options into each worker process, and equal settings give equal options."""

    request_timeout_s: float
    max_connections: int
    parser: Parser = "httptools"

    def __call__(self, **kwargs: Any) -> asyncio.Protocol:
        protocol = GuardedHttpToolsProtocol if self.parser == "httptools" else GuardedH11Protocol
        return protocol(guard=self, **kwargs)
