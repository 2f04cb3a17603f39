"""Retrieve: one `search_collection` call for one collection (runs as a parallel branch via `Send`)."""

from __future__ import annotations

from langgraph.runtime import Runtime

from graph import messages
from graph.events import Step, SubAgentStatus, emit
from graph.mcp_client import DocumentError
from graph.state import Context, SearchTask


async def retrieve(task: SearchTask, runtime: Runtime[Context]) -> dict:
    ctx, language = runtime.context, task["language"]
    name = ctx.display(task["collection"])
    emit(SubAgentStatus(name, "started"))
    emit(Step(messages.line("searching", language, coll=name)))
    try:
        evidence = (await ctx.docs.search(task["collection"], task["query"]))[: ctx.top_k]
    except DocumentError as exc:
        emit(SubAgentStatus(name, "failed", str(exc)))
        emit(Step(messages.line("failed", language, coll=name, error=exc)))
        return {"gaps": [messages.line("gap", language, coll=name, error=exc)]}
    key = "found" if evidence else "none_found"
    emit(Step(messages.line(key, language, coll=name, n=len(evidence))))
    emit(SubAgentStatus(name, "done", f"{len(evidence)}"))
    return {"evidence": evidence}
