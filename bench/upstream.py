"""The scripted fake upstream as a process of its own: `python -m bench.upstream --port N`.

A subprocess of the benchmark, like the document server. As a thread of the benchmark process it shared one
interpreter lock with the client: under load each held the other up (at 100 streams against 2 workers the
client's POSTs left it 53 ms late at p50 and 0.7 s at p95), and the report counted that as the service's time.
The fake's bookkeeping stays where it is (`tests/fakes/fake_llm.py`); this module serves it with the benchmark's
script and adds `GET /_bench/upstream-calls?since=N`, which hands over every call from the N-th on as
`[kind, start, first_token, end]` in `time.perf_counter()` seconds (CLOCK_MONOTONIC, shared by the processes;
`null` until known), with the total count.
"""

from __future__ import annotations

import argparse
import signal
from urllib.parse import parse_qs

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from bench.harness import CALLS_PATH, TOKEN_DELAY_S, TTFT_S, script_fake, upstream_calls
from tests.fakes.fake_llm import FakeLLM


class CallsEndpoint:
    """Answers CALLS_PATH from the fake's records; everything else goes to the fake."""

    def __init__(self, app: ASGIApp, fake: FakeLLM) -> None:
        self.app, self.fake = app, fake

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != CALLS_PATH:
            await self.app(scope, receive, send)
            return
        since = int(parse_qs(scope["query_string"].decode()).get("since", ["0"])[0])
        calls = upstream_calls(self.fake, since)
        rows = [[c.kind, c.start, c.first_token, c.end] for c in calls]
        await JSONResponse({"count": self.fake.calls, "calls": rows})(scope, receive, send)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.upstream")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ttft", type=float, default=TTFT_S, help="seconds to the first token")
    parser.add_argument("--token-delay", type=float, default=TOKEN_DELAY_S, help="seconds between tokens")
    args = parser.parse_args(argv)
    fake = script_fake(FakeLLM(ttft_s=args.ttft, token_delay_s=args.token_delay, fast=True))
    # blocked before the server thread starts (which inherits the mask), so SIGTERM only reaches sigwait
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    fake.start(args.port, wrap=lambda app: CallsEndpoint(app, fake))
    try:
        signal.sigwait(stop_signals)
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
