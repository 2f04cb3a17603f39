"""The stack's floor: `python -m bench.floor --port N --llm-url URL --mcp-url URL`.

What it is for: the other anchor of docs/BENCHMARKS.md (sections 2 and 8), beside the bare relay. The relay prices
one streamed model call on the service's HTTP stack; the floor prices the factual question's whole path on the
service's stack with none of its logic: the same FastAPI and sse-starlette, a LangGraph graph of the factual path's
shape (route -> plan -> one research task per collection, in parallel by `Send` -> summarize -> judge -> synthesize)
whose nodes only do the path's I/O, through the service's own clients created once in the lifespan: one search per
collection with `DocumentClient` (the direct tool calls where the server allows them) and one streamed answer call
with `LLMClient`, each delta forwarded as one `chat.completion.chunk` (through a queue, as the service's events go)
after an empty think block.

Its overhead (total minus the union of the waits, section 2) is what the stack costs whatever the pipeline does:
the service's overhead minus the floor's is what the pipeline's own work adds (routing, ranking, selection,
citations, filters, the think block, sources). It leaves out what the relay leaves out, and every node's logic.
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, TypedDict

from fastapi import FastAPI, Request
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from sse_starlette import EventSourceResponse

from bench.harness import ANSWER_MARKER
from bench.relay import chunk_event
from graph.clients.llm import LLMClient, StreamEnd
from graph.clients.mcp_client import DocumentClient
from graph.models import Evidence

COLLECTIONS = ("anvs", "iaea", "wetten_overheid", "security")  # the factual question searches all four (bench)
_END = object()


class FloorState(TypedDict):
    question: str
    collections: list[str]
    evidence: Annotated[list[Evidence], operator.add]


@dataclass
class FloorContext:
    docs: DocumentClient
    llm: LLMClient
    out: asyncio.Queue[object]


async def route(state: FloorState) -> dict:
    return {"collections": list(COLLECTIONS)}


async def plan(state: FloorState) -> dict:
    return {}


# the routing functions, as the service's: coroutines on the event loop, at the same three branches
async def after_route(state: FloorState) -> str:
    return "plan"


async def fan_out(state: FloorState) -> list[Send]:
    return [Send("research", {"question": state["question"], "collection": c}) for c in state["collections"]]


async def after_judge(state: FloorState) -> str:
    return "synthesize"


async def research(task: dict, runtime: Runtime[FloorContext]) -> dict:
    return {"evidence": await runtime.context.docs.search(task["collection"], task["question"])}


async def summarize(state: FloorState) -> dict:
    return {}


async def judge(state: FloorState) -> dict:
    return {}


async def synthesize(state: FloorState, runtime: Runtime[FloorContext]) -> dict:
    messages = [{"role": "system", "content": ANSWER_MARKER}, {"role": "user", "content": state["question"]}]
    async for piece in runtime.context.llm.stream(messages):
        if not isinstance(piece, StreamEnd):
            runtime.context.out.put_nowait(piece)
    return {}


def build_graph():
    graph = StateGraph(FloorState, context_schema=FloorContext)
    for name, node in (("route", route), ("plan", plan), ("research", research), ("summarize", summarize),
                       ("judge", judge), ("synthesize", synthesize)):
        graph.add_node(name, node)
    graph.add_edge(START, "route")
    graph.add_conditional_edges("route", after_route, ["plan"])
    graph.add_conditional_edges("plan", fan_out, ["research"])
    graph.add_edge("research", "summarize")
    graph.add_edge("summarize", "judge")
    graph.add_conditional_edges("judge", after_judge, ["synthesize"])
    graph.add_edge("synthesize", END)
    return graph.compile()


async def answer(graph, docs: DocumentClient, llm: LLMClient, question: str, model: str
                 ) -> AsyncIterator[dict[str, str]]:
    completion_id, created = f"chatcmpl-{uuid.uuid4().hex[:24]}", int(time.time())
    out: asyncio.Queue[object] = asyncio.Queue()

    async def run() -> None:
        try:
            await graph.ainvoke({"question": question, "collections": [], "evidence": []},
                                context=FloorContext(docs, llm, out))
        finally:
            out.put_nowait(_END)

    task = asyncio.create_task(run())
    try:
        yield chunk_event(completion_id, created, model, {"role": "assistant", "content": "<think>\n"})
        opening = "</think>\n\n"  # an empty think block, as a client sees the service's: the answer follows it
        while (piece := await out.get()) is not _END:
            yield chunk_event(completion_id, created, model, {"content": opening + piece})  # type: ignore[operator]
            opening = ""
        await task  # a failure ends the stream without [DONE], as the relay's
        yield chunk_event(completion_id, created, model, {}, "stop")
        yield {"data": "[DONE]"}
    finally:
        task.cancel()


def create_app(llm_url: str, mcp_url: str, max_concurrency: int) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.llm = LLMClient(llm_url, model="big", max_concurrency=max_concurrency)
        app.state.docs = DocumentClient(mcp_url)
        app.state.graph = build_graph()
        try:
            yield
        finally:
            await app.state.docs.aclose()
            await app.state.llm.aclose()

    app = FastAPI(lifespan=lifespan)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> EventSourceResponse:
        body = await request.json()
        state = request.app.state
        return EventSourceResponse(answer(state.graph, state.docs, state.llm, body["messages"][-1]["content"],
                                          body.get("model", "floor")), sep="\n")

    return app


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.split("\n\n")[1])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--llm-url", required=True, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:N/v1")
    parser.add_argument("--mcp-url", required=True, help="the document server's MCP endpoint, e.g. http://127.0.0.1:N/mcp")
    parser.add_argument("--max-concurrency", type=int, required=True,
                        help="LLMClient's cap and pool size: the service's LLM_MAX_CONCURRENCY")
    args = parser.parse_args(argv)
    uvicorn.run(create_app(args.llm_url, args.mcp_url, args.max_concurrency), host="127.0.0.1", port=args.port,
                log_level="warning", timeout_keep_alive=75)


if __name__ == "__main__":
    main()
