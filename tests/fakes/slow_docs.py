"""ASGI wrapper around the reference document server that delays chosen collections and counts MCP calls
in flight, so tests can make one collection slower than its timeout and see cancelled calls end."""

from __future__ import annotations

import asyncio
import threading

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class SlowCollections:
    def __init__(self, app: ASGIApp, delays: dict[str, float] | None = None) -> None:
        self.app = app
        self.delays = delays or {}
        self._lock = threading.Lock()
        self.in_flight = 0
        self.cancelled = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        delay = next((d for name, d in self.delays.items() if f'"collection":"{name}"'.encode() in body.replace(b" ", b"")), 0)
        with self._lock:
            self.in_flight += 1
        try:
            if delay:
                sleeper = asyncio.ensure_future(asyncio.sleep(delay))
                gone = asyncio.ensure_future(receive())  # http.disconnect when the client gives up
                done, _ = await asyncio.wait({sleeper, gone}, return_when=asyncio.FIRST_COMPLETED)
                sleeper.cancel()
                gone.cancel()
                if gone in done:
                    with self._lock:
                        self.cancelled += 1
                    return
            replayed = False

            async def replay() -> Message:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await self.app(scope, replay, send)
        finally:
            with self._lock:
                self.in_flight -= 1


class SlowToolServer:
    """A minimal MCP server (official SDK) whose `search_collection` takes `delay` seconds, counting calls in
    flight and calls the client cancelled (`notifications/cancelled` interrupts the tool)."""

    def __init__(self, delay: float) -> None:
        from mcp.server.mcpserver import MCPServer

        from docserver.server import transport_security

        self.delay, self.in_flight, self.cancelled = delay, 0, 0
        server = MCPServer("slow-docs")

        @server.tool()
        async def search_collection(query: str, collection: str):  # noqa: ANN202 - plain content, no schema
            self.in_flight += 1
            try:
                await asyncio.sleep(self.delay)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
            finally:
                self.in_flight -= 1
            return []

        self.app = server.streamable_http_app(transport_security=transport_security("127.0.0.1", ["*"]))
