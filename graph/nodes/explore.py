"""Explore: `list_documents` for exploratory and deep-dive questions (titles per collection)."""

from __future__ import annotations

from dataclasses import asdict

from langgraph.runtime import Runtime

from graph.answer import messages
from graph.answer.events import Step, degrade, emit
from graph.clients.mcp_client import DocumentError
from graph.context import Context
from graph.state import State


async def explore(state: State, runtime: Runtime[Context]) -> dict:
    ctx, route = runtime.context, state["route"]
    language = ctx.language
    try:
        refs = await ctx.docs.list_documents(route.search_query)
    except DocumentError as exc:
        degrade("documents", messages.line("failed", language, coll="list_documents", error=exc))
        return {"documents": []}
    # the server lists every collection it has; `ctx.docs` already left out those hidden from the caller
    refs = [r for r in refs if r.collection in route.collections]
    if not refs:
        emit(Step(messages.line("no_documents", language)))
    for name in route.collections:
        titles = [r.title for r in refs if r.collection == name]
        if titles:
            emit(Step(messages.line("documents", language, coll=ctx.display(name), titles="; ".join(titles[:3]))))
    return {"documents": [asdict(r) for r in refs]}
