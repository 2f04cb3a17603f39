"""A bare relay: `python -m bench.relay --port N --llm-url URL --max-concurrency N`.

What it is for: the anchor of section 8 of docs/BENCHMARKS.md. It is the least a streaming chat endpoint on the
service's own stack can do per request (FastAPI, sse-starlette on uvicorn, and the service's upstream client
`graph.clients.llm.LLMClient`, created once in the lifespan), so the service's CPU per streamed request is reported as a
multiple of this process's. POST /v1/chat/completions takes the last message's text, makes ONE streaming upstream
call with it (behind a system message with the answer prompt's marker, so the benchmark's fake upstream answers
with the same scripted answer as the service's answer call), and forwards each upstream text delta as one
`chat.completion.chunk` event, then a finish chunk and `data: [DONE]`.

What it deliberately leaves out, because each is a part of what the ratio prices: request validation (pydantic
models), authentication, rate limits, middleware, metrics and logging, GC tuning, the whole pipeline (routing,
document search, summaries, the think block, citations, sources), the response cache, the role and usage chunks,
and error handling beyond LLMClient's own retries (a failed upstream call just ends the stream without [DONE]).
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from sse_starlette import EventSourceResponse

from bench.harness import ANSWER_MARKER
from graph.clients.llm import LLMClient


def chunk_event(completion_id: str, created: int, model: str, delta: dict[str, str],
           finish: str | None = None) -> dict[str, str]:
    chunk: dict[str, Any] = {
        "id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return {"data": json.dumps(chunk, ensure_ascii=False, separators=(",", ":"))}


async def relay(llm: LLMClient, question: str, model: str) -> AsyncIterator[dict[str, str]]:
    completion_id, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
    messages = [{"role": "system", "content": ANSWER_MARKER}, {"role": "user", "content": question}]
    async for piece in llm.stream(messages):
        if isinstance(piece, str):  # the last item is the call's Usage, which a bare relay does not report
            yield chunk_event(completion_id, created, model, {"content": piece})
    yield chunk_event(completion_id, created, model, {}, "stop")
    yield {"data": "[DONE]"}


def create_app(llm_url: str, max_concurrency: int) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.llm = LLMClient(llm_url, model="big", max_concurrency=max_concurrency)
        try:
            yield
        finally:
            await app.state.llm.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> EventSourceResponse:
        body = await request.json()
        question = body["messages"][-1]["content"]
        return EventSourceResponse(relay(request.app.state.llm, question, body.get("model", "relay")), sep="\n")

    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__.split("\n\n")[1])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--llm-url", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:N/v1")
    parser.add_argument("--max-concurrency", type=int, required=True,
                        help="LLMClient's cap and pool size: the service's LLM_MAX_CONCURRENCY")
    args = parser.parse_args(argv)
    # the service's idle timeout (HTTP_IDLE_TIMEOUT_S): an idle client connection is still there for the next request
    uvicorn.run(create_app(args.llm_url, args.max_concurrency), host="127.0.0.1", port=args.port,
                log_level="warning", timeout_keep_alive=75)


if __name__ == "__main__":
    main()
