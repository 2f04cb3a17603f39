"""The reference document server with a stopwatch: `python -m bench.docserver --port N`.

It runs as a subprocess of the benchmark so that its work does not share a GIL with the benchmark's
client and fake upstream (the machine may have only two cores). A tiny ASGI middleware records the
(start, end) of every POST /mcp request in `time.perf_counter()` seconds; on Linux that is
CLOCK_MONOTONIC, the same clock in every process, so the benchmark can lay these intervals next to the
fake upstream's timings and its own request windows. `GET /_bench/mcp-intervals?clear=1` hands them over.
"""

from __future__ import annotations

import argparse
import time

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

INTERVALS_PATH = "/_bench/mcp-intervals"


class MCPTimer:
    """Records (start, end) of each POST /mcp; answers INTERVALS_PATH itself (that request is not recorded)."""

    def __init__(self, app: ASGIApp, path: str = "/mcp") -> None:
        self.app, self.path = app, path
        self.intervals: list[tuple[float, float]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the MCP session manager must start
            await self.app(scope, receive, send)
            return
        path = scope["path"].rstrip("/")
        if path == INTERVALS_PATH:
            await self._hand_over(scope, receive, send)
            return
        if scope["method"] != "POST" or path != self.path:  # GET /mcp is the long-lived notification stream
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            self.intervals.append((start, time.perf_counter()))

    async def _hand_over(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(self.intervals)
        if b"clear=1" in scope.get("query_string", b""):
            self.intervals = []
        await response(scope, receive, send)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    from docserver.server import KEEPALIVE_S, create_app

    parser = argparse.ArgumentParser(prog="python -m bench.docserver")
    parser.add_argument("--port", type=int, required=True)
    # a path that does not exist = the bundled corpus only, whatever someone ingested into the user cache
    parser.add_argument("--index", required=True, help="persisted index file (a missing file means none)")
    args = parser.parse_args(argv)
    app = MCPTimer(create_app(index_path=args.index))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False,
                timeout_keep_alive=KEEPALIVE_S)


if __name__ == "__main__":
    main()
