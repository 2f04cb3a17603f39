"""The whole pipeline on one screen.

    START -> route -> retrieve (one branch per collection, in parallel via Send) -> summarize -> synthesize -> END
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from graph.nodes.retrieve import retrieve
from graph.nodes.route import route
from graph.nodes.summarize import summarize
from graph.nodes.synthesize import synthesize
from graph.state import Context, SearchTask, State


def fan_out(state: State) -> list[Send]:
    """One retrieval branch per routed collection."""
    return [
        Send("retrieve", SearchTask(collection=name, query=state["route"].search_query, language=state["language"]))
        for name in state["route"].collections
    ]


def build_graph():
    graph = StateGraph(State, context_schema=Context)
    graph.add_node("route", route)
    graph.add_node("retrieve", retrieve)
    graph.add_node("summarize", summarize)
    graph.add_node("synthesize", synthesize)
    graph.add_edge(START, "route")
    graph.add_conditional_edges("route", fan_out, ["retrieve"])
    graph.add_edge("retrieve", "summarize")
    graph.add_edge("summarize", "synthesize")
    graph.add_edge("synthesize", END)
    return graph.compile()


def mermaid() -> str:
    return build_graph().get_graph().draw_mermaid()
