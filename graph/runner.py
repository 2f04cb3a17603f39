"""Runs the compiled graph for one request and yields its thought events as they happen.

`initial_state` is the single place that turns a conversation into pipeline state; the streaming and the
non-streaming HTTP paths both go through `run_pipeline`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from graph.events import ThoughtEvent
from graph.language import detect_language
from graph.state import Context, State, Turn, Usage


def initial_state(turns: list[Turn], system_hint: str = "") -> State:
    """Pipeline state for a conversation whose last turn is the user's question."""
    question = turns[-1].content.strip()
    return State(
        question=question,
        history=turns[:-1],
        language=detect_language(question),
        system_hint=system_hint,
        evidence=[],
        facts=[],
        gaps=[],
        usage=Usage(),
    )


async def run_pipeline(graph, state: State, context: Context) -> AsyncIterator[ThoughtEvent]:
    async for event in graph.astream(state, context=context, stream_mode="custom"):
        yield event
