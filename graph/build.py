"""The whole pipeline on one screen.

    START -> route -+---------------------------> plan -> research (one sub-agent per task, in parallel via Send)
                    |                              ^         |
                    +-> explore -+-----------------+         v
                                 +-> deep_read ---------> summarize -> judge -+-> research (the next round's tasks)
                                                                              +-> synthesize -> END

Which node comes next is decided by the small functions below; whether research goes on is decided by
`graph/loop.py:decide`, which `judge` applies. Each node runs in a span of its own (`traced`: a no-op unless
tracing is configured).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from graph.clients.tracing import traced
from graph.context import Context
from graph.nodes.deep_read import deep_read
from graph.nodes.explore import explore
from graph.nodes.judge import judge
from graph.nodes.plan import plan
from graph.nodes.research import research
from graph.nodes.route import route
from graph.nodes.summarize import summarize
from graph.nodes.synthesize import synthesize
from graph.state import State


def after_route(state: State) -> str:
    return "explore" if state["route"].query_type in ("exploratory", "deep_dive") else "plan"


def after_explore(state: State) -> str:
    return "deep_read" if state["route"].query_type == "deep_dive" else "plan"


def fan_out(state: State) -> list[Send]:
    """One research sub-agent per task of the current round."""
    return [Send("research", {"task": task, "question": state["question"]}) for task in state["loop"].tasks]


def after_judge(state: State) -> str | list[Send]:
    """Synthesize once the loop has stopped; otherwise research the next round's tasks."""
    return "synthesize" if state["loop"].stop else fan_out(state)


def on_loop(decide: Callable[[State], Any]) -> Callable[[State], Any]:
    """A routing function as a coroutine. LangGraph runs a plain `def` path in the thread pool (langchain_core's
    `run_in_executor`): a thread hop after every step that, under load, waits for the interpreter lock. The
    routing functions are pure and take microseconds, so they run on the event loop and stay testable as plain
    functions."""

    @wraps(decide)
    async def run(state: State) -> Any:
        return decide(state)

    return run


def build_graph():
    graph = StateGraph(State, context_schema=Context)
    graph.add_node("route", traced(route))
    graph.add_node("explore", traced(explore))
    graph.add_node("plan", traced(plan))
    graph.add_node("research", traced(research))
    graph.add_node("deep_read", traced(deep_read))
    graph.add_node("summarize", traced(summarize))
    graph.add_node("judge", traced(judge))
    graph.add_node("synthesize", traced(synthesize))
    graph.add_edge(START, "route")
    graph.add_conditional_edges("route", on_loop(after_route), ["plan", "explore"])
    graph.add_conditional_edges("explore", on_loop(after_explore), ["plan", "deep_read"])
    graph.add_conditional_edges("plan", on_loop(fan_out), ["research"])
    graph.add_edge("research", "summarize")
    graph.add_edge("deep_read", "summarize")
    graph.add_edge("summarize", "judge")
    graph.add_conditional_edges("judge", on_loop(after_judge), ["research", "synthesize"])
    graph.add_edge("synthesize", END)
    return graph.compile()


def mermaid() -> str:
    return build_graph().get_graph().draw_mermaid()
