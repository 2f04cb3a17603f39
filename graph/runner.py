"""Runs the compiled graph for one request and yields its thought events as they happen.

`start` is the single place that turns a conversation into pipeline state and the request's context; the
streaming and the non-streaming HTTP paths both go through it and `run_pipeline`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator

from graph.answer.events import ThoughtEvent, send_to
from graph.context import AnswerOptions, Context
from graph.loop import Loop
from graph.models import Turn, Usage
from graph.state import State
from graph.text.instructions import split as split_instructions
from graph.text.language import detect_language

_END = object()
log = logging.getLogger(__name__)


class NodeTimings:
    """Wall time per node name (summed over parallel branches and rounds), from LangGraph task events."""

    def __init__(self) -> None:
        self._started: dict[str, float] = {}
        self.seconds: dict[str, float] = {}

    def observe(self, task: dict) -> None:
        name = task["name"]
        if "input" in task:
            self._started[task["id"]] = time.perf_counter()
        elif task["id"] in self._started:
            elapsed = time.perf_counter() - self._started.pop(task["id"])
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed

    def summary(self) -> dict[str, float]:
        return {name: round(value, 4) for name, value in sorted(self.seconds.items())}


def start(turns: list[Turn], context: Context, tenant: str = "anonymous",
          answer: AnswerOptions | None = None) -> tuple[State, Context]:
    """Pipeline state and the request's context for a conversation whose last turn is the user's question;
    `answer`: what the caller asked of the answer (request fields)."""
    question, instructions = split_instructions(turns[-1].content.strip())
    state = State(question=question, instructions=instructions, history=turns[:-1], route=None, documents=[],
                  loop=Loop(), evidence=[], facts=[], outcomes=[], gaps=[], unfound=[], answer="", sources=[],
                  usage=Usage())
    language = instructions.language or detect_language(question)
    return state, context.for_request(language=language, tenant=tenant, answer=answer)


async def run_pipeline(
    graph, state: State, context: Context, *, max_concurrency: int = 8
) -> AsyncIterator[ThoughtEvent]:
    """Events of one graph run. The run lives in a task of its own that is cancelled as soon as the consumer
    stops (client disconnect, timeout): LangGraph cancels its node tasks, and with them every upstream and
    MCP call in flight, on a plain task cancellation, but not reliably when the cancellation arrives through
    an anyio cancel scope around the consumer (as in sse-starlette)."""
    queue: asyncio.Queue[object] = asyncio.Queue()

    timings = NodeTimings()

    async def pump() -> None:
        send_to(queue)  # the thought events the nodes emit, in this task's context and its node tasks'
        try:
            # "tasks" marks node starts and ends, which gives the per-node timings for the log
            config = {"max_concurrency": max_concurrency, "recursion_limit": 50}
            async for chunk in graph.astream(state, config, context=context, stream_mode="tasks"):
                timings.observe(chunk)
            queue.put_nowait(_END)
            log.info("pipeline finished", extra={"node_seconds": timings.summary()})
        except Exception as exc:  # handed to the consumer, which decides how to report it
            queue.put_nowait(exc)

    task = asyncio.create_task(pump(), name="pipeline")
    try:
        while (item := await queue.get()) is not _END:
            if isinstance(item, Exception):
                raise item
            yield item  # type: ignore[misc]
    finally:
        task.cancel()
