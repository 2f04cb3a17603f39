"""Route: language, query type and target collections (heuristics)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph import messages
from graph.events import Step, emit
from graph.routing import heuristic_route
from graph.state import Context, State


async def route(state: State, runtime: Runtime[Context]) -> dict:
    ctx, language = runtime.context, state["language"]
    decision = heuristic_route(state["question"], ctx.collections)
    kind = messages.kind_label(decision.query_type, language)
    if decision.reason:
        emit(Step(messages.line("route_signal", language, kind=kind, signal=decision.reason)))
    else:
        emit(Step(messages.line("route", language, kind=kind)))
    names = ", ".join(ctx.display(c) for c in decision.collections)
    emit(Step(messages.line("collections", language, names=names)))
    if ctx.llm is None:
        emit(Step(messages.line("offline", language)))
    return {"route": decision}
