"""Request body size limit (413).

Starlette has no built-in body limit, so this small ASGI middleware rejects a too large Content-Length at
once and otherwise reads the body (at most `max_bytes`) before the app does, then replays it. An upload
(`POST /v1/files`, `streamed`) passes through: its route writes the file to disk as it arrives and enforces a limit of
its own (`app.uploads`, MAX_UPLOAD_BYTES).
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import error_response

STREAMED = frozenset({("POST", "/v1/files")})  # (method, path) of the routes that read their body as it arrives


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int, streamed: frozenset[tuple[str, str]] = STREAMED) -> None:
        self.app, self.max_bytes, self.streamed = app, max_bytes, streamed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS") or \
                (scope["method"], scope["path"].rstrip("/")) in self.streamed:
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            await self._reject(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # client went away before sending the body
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.max_bytes:
                await self._reject(scope, receive, send)
                return
        body, replayed = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later calls wait for http.disconnect, as Starlette expects

        await self.app(scope, replay, send)

    async def _reject(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(413, f"request body larger than {self.max_bytes} bytes", code="request_too_large")
        await response(scope, receive, send)
